# The one image of every managed-agents role: `serve` (the default), `worker`, `controller`,
# `migrate`, ... are subcommands of the same static binary. Nothing else is in it but a CA
# bundle (the HTTPS model client needs one) and an empty /tmp; it runs as the non-root uid
# 65532, the distroless "nonroot" user (scratch has no /etc/passwd to name a user in).
#
# Two ways to build it, chosen by BINARY (BuildKit skips the stage not chosen):
#   docker build -t managed-agents .                       compiles from source in golang:GO_VERSION
#   make docker-build   (BINARY=prebuilt)                   copies the static binary make built and
#                                                           the files it staged: no base image to pull
ARG GO_VERSION=1.26
ARG BINARY=source

FROM golang:${GO_VERSION} AS source
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/managed-agents . && \
    mkdir -p /out/rootfs/etc/ssl/certs /out/rootfs/tmp /out/data && chmod 1777 /out/rootfs/tmp && \
    cp /etc/ssl/certs/ca-certificates.crt /out/rootfs/etc/ssl/certs/ca-certificates.crt

FROM scratch AS prebuilt
COPY dist/image/rootfs/ /out/rootfs/
COPY bin/managed-agents /out/managed-agents
COPY dist/image/data/ /out/data/

FROM ${BINARY} AS binary

FROM scratch
COPY --from=binary /out/rootfs/ /
COPY --from=binary /out/managed-agents /managed-agents
# /data is the working and data directory (dev's default ./.data lands in it), owned by the
# user the image runs as; mount a volume there to keep it. The chart mounts nothing here: its
# roles keep no state on disk.
COPY --from=binary --chown=65532:65532 /out/data/ /data/
WORKDIR /data
USER 65532:65532
ENTRYPOINT ["/managed-agents"]
CMD ["serve"]
