# The rollout-stream image: the CLI as entrypoint, so one image runs every
# command (`run`, `topics create`, `loadgen`, `dlq`, `replay`, ...).
#
#   podman build --build-arg BASE=docker.io/library/node:24-bookworm-slim -t rollout-stream .
#   ./rollout-stream image build        # here: a base made from Debian packages
#
# BASE: any Debian-based image with Node.js 24 (node, npm) in /usr/local/bin.
ARG BASE=docker.io/library/node:24-bookworm-slim

FROM ${BASE} AS build
ENV NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false
WORKDIR /src
COPY package.json package-lock.json ./
# The build machine's CA bundle, when its network needs one (a TLS proxy):
# `--secret id=ca,src=<bundle>`; it stays out of the image.
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/ca; fi \
 && npm ci --no-audit --no-fund --loglevel=error
COPY tsconfig.json tsconfig.build.json ./
COPY bench bench
COPY cli cli
COPY config config
COPY errors errors
COPY json-form json-form
COPY loadgen loadgen
COPY processors processors
COPY schemas schemas
COPY streams streams
COPY tools tools
RUN npx tsc -p tsconfig.build.json \
 && cp schemas/*.avsc dist/schemas/ \
 && node dist/cli/main.js --version
# Production dependencies only (what npm ci fetched; nothing new is downloaded).
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/ca; fi \
 && npm prune --omit=dev --prefer-offline --loglevel=error

FROM ${BASE}
# tini as PID 1 forwards SIGTERM to node and reaps children.
RUN if ! command -v tini >/dev/null; then \
      apt-get update -q && apt-get install -y -q --no-install-recommends tini ca-certificates \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
 && if ! id -u rollout >/dev/null 2>&1; then useradd --system --uid 10001 --user-group --home-dir /app --shell /usr/sbin/nologin rollout; fi
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules node_modules
COPY --from=build /src/dist dist
# Metrics and health listen on every interface inside the container (the
# host decides what is published); the port is the runtime's default.
ENV NODE_ENV=production \
    METRICS_HOST=0.0.0.0 \
    METRICS_PORT=9464 \
    LOG_FORMAT=json
USER rollout
EXPOSE 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "/app/dist/cli/healthcheck.js"]
ENTRYPOINT ["/usr/bin/tini", "--", "node", "--enable-source-maps", "/app/dist/cli/main.js"]
CMD ["--help"]
