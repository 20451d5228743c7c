module github.com/longhorn/longhorn-spdk-engine

go 1.26.0
