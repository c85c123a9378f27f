// The desktop page: noVNC's RFB client on the daemon's bridge (exec_daemon/rpc/desktop_server.py).
// The token never reaches this script: the daemon exchanged it for an HttpOnly cookie and took it
// out of the address bar before the page loaded; the cookie is sent only under this page's path
// (/s/<scope>/), so every address here is relative. View-only is enforced by the daemon too.
import RFB from "../novnc/core/rfb.js";

const screen = document.getElementById("screen");
const statusText = document.getElementById("status");
const who = document.getElementById("who");
const toggle = document.getElementById("toggle");

let interactive = new URLSearchParams(location.search).get("mode") === "control";
let rfb = null;
let retryMs = 500;
let retryTimer = null;
let connects = 0;

function bridgeUrl() {
  const url = new URL(`websockify?mode=${interactive ? "control" : "view"}`, location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  return url.toString();
}

function showMode() {
  toggle.textContent = interactive ? "Hand back" : "Take control";
  who.textContent = interactive
    ? "you have control: the agent's computer use waits until you hand back"
    : "the agent has control (you are watching)";
  who.className = interactive ? "person" : "";
  document.body.dataset.mode = interactive ? "control" : "view";
  const url = new URL(location.href);
  if (interactive) url.searchParams.set("mode", "control");
  else url.searchParams.delete("mode");
  history.replaceState(null, "", url);
}

function connect() {
  retryTimer = null;
  statusText.textContent = "connecting…";
  document.body.dataset.connected = "false";
  const client = new RFB(screen, bridgeUrl(), { shared: true });
  client.viewOnly = !interactive;
  client.scaleViewport = true; // fits the window, whatever its size
  client.resizeSession = false; // never changes the agent's screen
  client.focusOnClick = interactive;
  client.addEventListener("connect", () => {
    retryMs = 500;
    statusText.textContent = "connected";
    document.body.dataset.connected = "true";
    document.body.dataset.connects = String(++connects);
  });
  client.addEventListener("disconnect", () => {
    if (rfb !== client) return; // replaced on purpose (mode change)
    rfb = null;
    document.body.dataset.connected = "false";
    statusText.textContent = `disconnected; reconnecting in ${(retryMs / 1000).toFixed(1)} s`;
    retryTimer = setTimeout(connect, retryMs);
    retryMs = Math.min(retryMs * 2, 8000);
  });
  rfb = client;
}

function switchMode() {
  interactive = !interactive;
  showMode();
  const old = rfb;
  rfb = null;
  if (old) old.disconnect();
  if (retryTimer) clearTimeout(retryTimer);
  connect();
}

toggle.addEventListener("click", switchMode);
showMode();
connect();

// The sign-in cookie is short-lived: renewed while the page is open.
const RENEW_MS = 60000;
setInterval(() => fetch("session", { cache: "no-store" }).catch(() => {}), RENEW_MS);
