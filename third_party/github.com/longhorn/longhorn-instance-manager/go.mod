module github.com/longhorn/longhorn-instance-manager

go 1.26.0
