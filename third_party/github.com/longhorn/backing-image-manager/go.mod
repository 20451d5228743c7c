module github.com/longhorn/backing-image-manager

go 1.26.0
