# syntax=docker/dockerfile:1
#
# The released image, ghcr.io/osb-gateway/osb-gateway:<version>: the
# release's own linux binaries (GoReleaser's dockers_v2 puts them in the
# build context under <os>/<arch>/), on distroless static, non-root. Built
# by .goreleaser.yaml only; to build an image from source, use
# deploy/Dockerfile.
#
# Run (the state on a named volume; --stop-timeout covers the config's
# listen.shutdown_delay + listen.shutdown_grace, 5s + 20s in the chart's
# defaults, so docker stop lets requests finish):
#   docker run -d --name osb-gateway --stop-timeout 30 -p 8080:8080 -v osb-gateway-state:/var/lib/osb-gateway -v "$PWD/deploy/docker/gateway.yaml:/etc/osb-gateway/gateway.yaml:ro" -e SAMPLE_BROKER_PASSWORD=sample-secret -e CF_PROD_PASSWORD=change-me ghcr.io/osb-gateway/osb-gateway:v0.1.0

# Pinned by digest (the multi-platform index of the tag named); refresh with
#   docker buildx imagetools inspect gcr.io/distroless/static-debian12:nonroot
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab

FROM ${RUNTIME_IMAGE} AS base

FROM base AS gateway
ARG TARGETPLATFORM
COPY ${TARGETPLATFORM}/osb-gateway /usr/local/bin/osb-gateway
# The state directory, owned by the image's non-root user (the base's empty
# home directory, copied: the image has no shell to mkdir with); a named
# volume mounted here starts with this owner.
COPY --from=base --chown=65532:65532 /home/nonroot /var/lib/osb-gateway
WORKDIR /var/lib/osb-gateway
VOLUME ["/var/lib/osb-gateway"]
USER 65532:65532
EXPOSE 8080 9090
# SIGTERM starts the drain (listen.shutdown_delay, then shutdown_grace).
STOPSIGNAL SIGTERM
# The admin listener's /healthz (admin.address, default 127.0.0.1:9090);
# the image has no shell, curl or wget.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["/usr/local/bin/osb-gateway", "health", "-addr", "127.0.0.1:9090"]
ENTRYPOINT ["/usr/local/bin/osb-gateway"]
CMD ["serve", "-config", "/etc/osb-gateway/gateway.yaml"]
