module github.com/longhorn/longhorn-share-manager

go 1.26.0
