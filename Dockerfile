# syntax=docker/dockerfile:1
# A static bfserver on distroless (no shell, no package manager), as the
# non-root user 65532. Build: make docker, or
#   docker build --build-arg COMMIT=$(git rev-parse HEAD) -t bfserver .
# Run one node (Raft on the container's loopback: a Raft port off loopback
# needs a cluster secret):
#   docker run -d -p 6379:6379 -p 9121:9121 -v bfdata:/data \
#     -e BFSERVER_REQUIREPASS=secret -e BFSERVER_RAFT_ADDR=127.0.0.1:16379 bfserver
# See docs/DEPLOY.md for clusters (BFSERVER_CLUSTER_SECRET on every node).

ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The context has no .git (.dockerignore), so the commit comes in as an
# argument rather than from go build's VCS stamp.
ARG VERSION= COMMIT= BUILD_DATE=
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.buildDate=${BUILD_DATE}" \
      -o /out/bfserver ./cmd/bfserver \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bfserver /usr/local/bin/bfserver
# An empty data directory owned by the runtime user: a new named volume
# takes this ownership.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
# Every flag is also a BFSERVER_* variable. 0.0.0.0 is right for one node;
# a node of a cluster must advertise an address its peers can reach, so set
# BFSERVER_ADDR to its own name (docs/DEPLOY.md).
ENV BFSERVER_ADDR=0.0.0.0:6379 \
    BFSERVER_DATA_DIR=/data \
    BFSERVER_HTTP_ADDR=0.0.0.0:9121 \
    BFSERVER_LOG_FORMAT=json
VOLUME ["/data"]
# RESP, Raft (RESP port + 10000), HTTP (/metrics, /healthz, /readyz).
EXPOSE 6379 16379 9121
# The image has no curl: the binary probes its own /readyz on
# BFSERVER_HTTP_ADDR and exits 0 or 1.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/bfserver", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/bfserver"]
