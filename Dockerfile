# The sandbox VM image: exec-daemon installed at /exec-daemon, serving /workspace as user `ubuntu`
# on 8080 (Connect/gRPC/gRPC-Web) and 8081 (PTY WebSocket, web terminal).
#
#   docker build -t exec-daemon .
#   docker run -e EXEC_DAEMON_AUTH_TOKEN=$(openssl rand -hex 32) -p 8080:8080 -p 8081:8081 exec-daemon
#
# Arguments after the image name replace CMD, e.g. `serve --workspace /workspace --ghost-mode false
# --trace-endpoint ...`. The daemon runs as PID 1 itself (it reaps orphans); the sandbox needs
# unprivileged user namespaces, which Docker's default seccomp profile refuses: without
# `--security-opt seccomp=unconfined` it reports itself degraded in the log.
FROM debian:bookworm-slim

ARG DEBIAN_FRONTEND=noninteractive
ENV LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1

# Every Debian package scripts/setup installs (tests/test_dockerfile.py keeps the two in step),
# in their own layer so that a code change does not reinstall them; plus what a fresh slim image
# lacks that setup takes for granted (Python and its venv, CA certificates, the C library
# headers) and what an agent expects in its VM (ps, sudo). Unpinned: bookworm's security updates.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        python3 python3-venv ca-certificates \
        git bash curl nodejs npm chromium gcc libc6-dev libseccomp-dev \
        xvfb xdotool ffmpeg x11-utils python3-tk shellcheck less \
        procps sudo \
    && rm -rf /var/lib/apt/lists/*

# The agent's user: owns the workspace and the artifacts folder; sudo for environment.json installs.
RUN useradd --create-home --uid 1000 --shell /bin/bash ubuntu \
    && echo 'ubuntu ALL=(ALL) NOPASSWD:ALL' >/etc/sudoers.d/ubuntu \
    && chmod 0440 /etc/sudoers.d/ubuntu \
    && mkdir -p /workspace /opt/cursor/artifacts \
    && chown ubuntu:ubuntu /workspace /opt/cursor/artifacts

# The venv (.venv, project editable), the sandbox helper (beside the venv's python) and the npm
# packages (xterm.js for the web terminal), all by scripts/setup; then bytecode, since the
# non-root daemon cannot write __pycache__ under /exec-daemon.
COPY . /exec-daemon
WORKDIR /exec-daemon
RUN ./scripts/setup \
    && .venv/bin/python -m compileall -q exec_daemon tools sandbox proto

USER ubuntu
WORKDIR /workspace
EXPOSE 8080 8081
# `exec-daemon ping` exits 0 once a Ping with the token (EXEC_DAEMON_AUTH_TOKEN) is answered.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
    CMD ["/exec-daemon/.venv/bin/exec-daemon", "ping", "--timeout", "5"]
# The token comes from EXEC_DAEMON_AUTH_TOKEN, which the daemon removes from its environment at
# start, or from `--auth-token-file` (e.g. a mounted secret, mode 0600); never from argv, which
# every process can read. serve refuses to start without one.
ENTRYPOINT ["/exec-daemon/.venv/bin/exec-daemon"]
CMD ["serve", "--workspace", "/workspace"]
