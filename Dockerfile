# replayd server image. Build: podman build -t replayd . (or docker build); see docs/DEPLOY.md.
# Stage 1 compiles only the server; stage 2 holds the binary and the shared libraries it
# links, computed from the binary itself, on debian:bookworm-slim.
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      cmake g++ make pkg-config libasio-dev libboost-json1.81-dev prometheus-cpp-dev \
      libcli11-dev libspdlog-dev libzstd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DREPLAYD_BUILD_TESTS=OFF -DREPLAYD_BUILD_BENCH=OFF \
 && cmake --build /build -j"$(nproc)" --target replayd \
 && strip /build/service/replayd \
 && for lib in $(ldd /build/service/replayd | awk '$3 ~ /^\// {print $3}'); do \
      dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib"; \
    done | cut -d: -f1 | sort -u > /build/runtime-packages \
 && cat /build/runtime-packages

FROM debian:bookworm-slim
COPY --from=build /build/runtime-packages /tmp/runtime-packages
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(cat /tmp/runtime-packages) \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
 && groupadd --system --gid 999 replayd \
 && useradd --system --uid 999 --gid replayd --home-dir /var/lib/replayd replayd \
 && mkdir -p /etc/replayd /var/lib/replayd && chown replayd:replayd /var/lib/replayd
COPY --from=build /build/service/replayd /usr/local/bin/replayd
COPY config/container.json /etc/replayd/replayd.json
# uid and gid 999 are fixed: config/deploy/statefulset.yaml runs the pod as 999:999 (a
# Kubernetes runAsNonRoot check cannot resolve a user name) with fsGroup 999 on the volume.
USER replayd
VOLUME /var/lib/replayd
EXPOSE 7700 9700
# The token comes from REPLAYD_TOKEN; without one the server refuses to listen on 0.0.0.0
# unless started with --insecure.
ENV REPLAYD_TOKEN=""
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/replayd", "--probe", "http://127.0.0.1:9700/healthz"]
ENTRYPOINT ["/usr/local/bin/replayd", "--config", "/etc/replayd/replayd.json"]
CMD []
