module github.com/longhorn/longhorn-engine

go 1.26.0
