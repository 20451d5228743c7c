module github.com/longhorn/types

go 1.26.0
