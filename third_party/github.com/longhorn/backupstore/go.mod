module github.com/longhorn/backupstore

go 1.26.0
