# The image that `make docker-build` builds: the static binary (CGO_ENABLED=0) and nothing
# else it does not need. FROM scratch because no image registry is reachable here to pull a
# base from; make stages the CA bundle and an empty /tmp in dist/image/rootfs.
FROM scratch
COPY dist/image/rootfs/ /
COPY bin/managed-agents /managed-agents
# /data is the working and data directory (dev's default ./.data lands in it), owned by the
# user the image runs as; mount a volume there to keep it.
COPY --chown=65532:65532 dist/image/data/ /data/
WORKDIR /data
# A fixed non-root uid (distroless "nonroot"): scratch has no /etc/passwd to name a user in.
USER 65532:65532
ENTRYPOINT ["/managed-agents"]
CMD ["serve"]
