module github.com/bfserver/bfserver

go 1.26.8
