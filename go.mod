module github.com/cloudnative-czs/vm-controller

go 1.26.0
