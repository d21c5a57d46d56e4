# sediment in a container (README "Install"): a Debian 12 build stage makes the Debian package
# with cpack; the runtime stage installs that package, so the layout is the .deb's: /usr/bin/
# sediment, /etc/sediment/sediment.toml, data in /var/lib/sediment (a volume), user `sediment`.
#   docker build -t sediment .
#   docker run -p 8080:8080 -v sediment-data:/var/lib/sediment sediment
#   docker stop -t 45 CONTAINER   (SIGTERM: graceful shutdown within 30 s; docker kills after -t)
# Settings: SEDIMENT_<FLAG> variables (they win over the config file), or mount your own
# /etc/sediment/sediment.toml.

FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/librdkafka.sh scripts/
RUN apt-get update -qq && scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN rm -rf build \
 && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
 && ninja -C build sediment \
 && cd build && cpack -G DEB && mv sediment_*.deb /sediment.deb

FROM debian:12
COPY --from=build /sediment.deb /tmp/sediment.deb
# apt resolves the package's shared-library dependencies; postinst creates the user and data dir
# (systemd is absent: the unit is not started).
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/sediment.deb \
 && rm -rf /var/lib/apt/lists/* /tmp/sediment.deb
# In a container the node listens on every address; clients and other nodes reach it by the
# advertised address (set SEDIMENT_ADVERTISE to the host's name:port for a cluster).
ENV SEDIMENT_LISTEN=0.0.0.0:8080 \
    SEDIMENT_ADVERTISE=127.0.0.1:8080
USER sediment
VOLUME ["/var/lib/sediment"]
EXPOSE 8080
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/sediment"]
CMD ["server", "--config", "/etc/sediment/sediment.toml"]
