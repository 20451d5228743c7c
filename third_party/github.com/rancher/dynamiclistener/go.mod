module github.com/rancher/dynamiclistener

go 1.26.0
