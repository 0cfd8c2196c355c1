# bfserver: build, test, install. The build is a static binary:
#
#   CGO_ENABLED=0 go build -trimpath -buildvcs=auto \
#     -ldflags "-s -w -X main.commit=$(git rev-parse HEAD) -X main.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
#     -o bin/bfserver ./cmd/bfserver
#
# (-s -w strip the symbol table and DWARF; -trimpath drops local paths.
# go build stamps the module version and commit by itself in a Git
# checkout; the -X values fill in where it cannot, e.g. in a worktree.)

BIN        ?= bin/bfserver
PREFIX     ?= /usr/local
DESTDIR    ?=
GO         ?= go
COMMIT     ?= $(shell git rev-parse HEAD 2>/dev/null)
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null)
# SOURCE_DATE_EPOCH, when set, makes the date reproducible.
BUILD_DATE ?= $(shell date -u $(if $(SOURCE_DATE_EPOCH),-d @$(SOURCE_DATE_EPOCH)) +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS    := -s -w -X main.commit=$(COMMIT) -X main.version=$(VERSION) -X main.buildDate=$(BUILD_DATE)
IMAGE      ?= bfserver:latest

.PHONY: build test install uninstall docker clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/bfserver

# The README's test command.
test:
	$(GO) test ./...

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/bfserver

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/bfserver

# Needs a Docker engine.
docker:
	docker build --build-arg COMMIT=$(COMMIT) --build-arg VERSION=$(VERSION) --build-arg BUILD_DATE=$(BUILD_DATE) -t $(IMAGE) .

clean:
	rm -rf bin
