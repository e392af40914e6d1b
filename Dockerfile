# The one image of every managed-agents role: `serve` (the default), `worker`, `controller`,
# `migrate`, ... are subcommands of the same static binary. Nothing else is in it but a CA
# bundle (the HTTPS model client needs one) and an empty /tmp; it runs as the non-root uid
# 65532, the distroless "nonroot" user (scratch has no /etc/passwd to name a user in).
#
#   docker build -t managed-agents --build-arg VERSION=v0.1.0 .
#
# compiles it from source in golang:GO_VERSION. Without a registry to pull that from, `make
# docker-build` builds the same image from a binary compiled on the host
# (build/image/Dockerfile).
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -X main.version=${VERSION}" -o /out/managed-agents . && \
    mkdir -p /out/rootfs/etc/ssl/certs /out/rootfs/tmp /out/data && chmod 1777 /out/rootfs/tmp && \
    cp /etc/ssl/certs/ca-certificates.crt /out/rootfs/etc/ssl/certs/ca-certificates.crt

FROM scratch
COPY --from=build /out/rootfs/ /
COPY --from=build /out/managed-agents /managed-agents
# /data is the working and data directory (dev's default ./.data lands in it), owned by the
# user the image runs as; mount a volume there to keep it. The chart's roles keep no state
# on disk and mount nothing there.
COPY --from=build --chown=65532:65532 /out/data/ /data/
WORKDIR /data
USER 65532:65532
ENTRYPOINT ["/managed-agents"]
CMD ["serve"]
