// The caustic viewer's page. It talks to the server over one WebSocket:
// requests go out as JSON text (`protocol.rs` lists them); frames come in
// as a JSON `frame` message with the statistics followed by the JPEG in a
// binary message. Mouse moves are summed and sent once per animation frame,
// so a drag costs at most 60 requests a second, well inside the server's
// rate limit. `window.viewer` holds the state, for the console and tests.
'use strict';

const viewer = {
  socket: null,
  hello: null,
  // Statistics of the image on the canvas, and of the one being decoded.
  stats: null,
  pending: null,
  framesDrawn: 0,
  errors: [],
  // Arrival times (ms) of the frames of the last second, for the fps.
  recent: [],
  // Sequence numbers: JPEGs decode asynchronously, and an older frame that
  // finishes decoding late must not cover a newer one.
  received: 0,
  drawn: 0,
  // Sends a text message as it is: for trying the server's error replies.
  sendRaw(text) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) this.socket.send(text);
  },
};
window.viewer = viewer;

const $ = (id) => document.getElementById(id);
const canvas = $('image');
const context = canvas.getContext('2d');

// Radians of orbit per pixel of drag: the canvas height is half a turn.
const orbitPerPixel = () => Math.PI / canvas.getBoundingClientRect().height;

function send(message) {
  viewer.sendRaw(JSON.stringify(message));
}

function connect() {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const socket = new WebSocket(`${scheme}//${location.host}/ws`);
  socket.binaryType = 'blob';
  socket.onopen = () => status('connected');
  socket.onmessage = (event) => {
    if (typeof event.data === 'string') onText(event.data);
    else onImage(event.data);
  };
  socket.onclose = (event) => status(`disconnected (${event.code}${event.reason ? ': ' + event.reason : ''}); reload to reconnect`);
  viewer.socket = socket;
}

function status(text) {
  $('status').textContent = text;
}

function onText(text) {
  let message;
  try {
    message = JSON.parse(text);
  } catch (e) {
    showError('the server sent a message this page cannot read');
    return;
  }
  if (message.type === 'hello') onHello(message);
  else if (message.type === 'frame') viewer.pending = message;
  else if (message.type === 'error') showError(message.message);
}

function onHello(hello) {
  viewer.hello = hello;
  $('scene').textContent = `${hello.scene} on ${hello.device}`;
  canvas.width = hello.width;
  canvas.height = hello.height;
  fitCanvas();
  fillSelect($('integrator'), hello.integrators, hello.integrator);
  const structures = $('structures');
  structures.replaceChildren(...hello.structures.map((name) => new Option(name)));
  $('accel').value = hello.accel;
  $('budget').value = hello.budget;
  $('budget').max = hello.max_budget;
  if (hello.clock) {
    $('clock').disabled = false;
    $('scrub').min = hello.clock.start;
    $('scrub').max = hello.clock.end;
  }
}

// Shows the image as large as the window allows, small images enlarged,
// leaving room for the controls under it.
function fitCanvas() {
  const room = {
    width: $('stage').clientWidth,
    height: Math.max(160, window.innerHeight * 0.72),
  };
  const scale = Math.min(room.width / canvas.width, room.height / canvas.height);
  canvas.style.width = `${Math.floor(canvas.width * scale)}px`;
  canvas.style.height = `${Math.floor(canvas.height * scale)}px`;
}
window.addEventListener('resize', fitCanvas);

function fillSelect(select, names, chosen) {
  select.replaceChildren(...names.map((name) => new Option(name, name, false, name === chosen)));
}

async function onImage(blob) {
  const stats = viewer.pending;
  viewer.pending = null;
  const sequence = ++viewer.received;
  let bitmap;
  try {
    bitmap = await createImageBitmap(blob);
  } catch (e) {
    showError('a frame could not be decoded');
    return;
  }
  if (sequence < viewer.drawn) {
    bitmap.close();
    return;
  }
  viewer.drawn = sequence;
  context.drawImage(bitmap, 0, 0, canvas.width, canvas.height);
  bitmap.close();
  viewer.stats = stats;
  viewer.framesDrawn += 1;
  const now = performance.now();
  viewer.recent.push(now);
  while (viewer.recent[0] < now - 1000) viewer.recent.shift();
  showStats(stats);
}

function showStats(s) {
  if (!s) return;
  const lines = [];
  if (viewer.hello && viewer.hello.clock) {
    const clock = viewer.hello.clock;
    lines.push(`frame ${s.frame + 1}/${clock.frames}  t = ${s.time.toFixed(3)} s${s.playing ? '  playing' : ''}`);
  }
  const preview = s.scale > 1 ? `  preview at 1/${s.scale} size` : '';
  lines.push(`${s.integrator}  ${s.samples}/${s.budget} ${s.integrator === 'sppm' ? 'passes' : 'spp'}${s.done ? '  done' : ''}${preview}`);
  lines.push(`fps ${viewer.recent.length}  update ${s.update_ms.toFixed(1)} ms  render ${s.render_ms.toFixed(1)} ms  ${s.mrays_per_s.toFixed(1)} Mrays/s`);
  lines.push(s.structure);
  $('overlay').textContent = lines.join('\n');
  $('play').textContent = s.playing ? 'Pause' : 'Play';
  if (!scrubbing) $('scrub').value = s.time;
  $('time').textContent = `${s.time.toFixed(3)} s`;
}

function showError(text) {
  viewer.errors.push(text);
  const item = document.createElement('li');
  item.textContent = text;
  const list = $('errors');
  list.prepend(item);
  while (list.children.length > 5) list.lastChild.remove();
}

// Camera moves, summed between animation frames.
const moves = { yaw: 0, pitch: 0, right: 0, up: 0, zoom: 1, scheduled: false };

function schedule() {
  if (moves.scheduled) return;
  moves.scheduled = true;
  requestAnimationFrame(flushMoves);
}

function flushMoves() {
  moves.scheduled = false;
  if (moves.yaw || moves.pitch) send({ type: 'orbit', yaw: moves.yaw, pitch: moves.pitch });
  if (moves.right || moves.up) send({ type: 'pan', right: moves.right, up: moves.up });
  if (moves.zoom !== 1) send({ type: 'zoom', factor: Math.min(100, Math.max(0.01, moves.zoom)) });
  Object.assign(moves, { yaw: 0, pitch: 0, right: 0, up: 0, zoom: 1 });
}

let drag = null;

canvas.addEventListener('pointerdown', (event) => {
  const pan = event.button === 2 || event.shiftKey;
  drag = { pan, x: event.clientX, y: event.clientY };
  canvas.setPointerCapture(event.pointerId);
  event.preventDefault();
});

canvas.addEventListener('pointermove', (event) => {
  if (!drag) return;
  const dx = event.clientX - drag.x;
  const dy = event.clientY - drag.y;
  drag.x = event.clientX;
  drag.y = event.clientY;
  if (drag.pan) {
    // The scene follows the pointer: the camera moves the other way.
    const height = canvas.getBoundingClientRect().height;
    moves.right -= dx / height;
    moves.up += dy / height;
  } else {
    // Dragging right turns the scene right; dragging down lifts the eye.
    moves.yaw += dx * orbitPerPixel();
    moves.pitch += dy * orbitPerPixel();
  }
  schedule();
});

const endDrag = () => {
  drag = null;
};
canvas.addEventListener('pointerup', endDrag);
canvas.addEventListener('pointercancel', endDrag);
canvas.addEventListener('contextmenu', (event) => event.preventDefault());
canvas.addEventListener('wheel', (event) => {
  event.preventDefault();
  moves.zoom *= Math.exp(event.deltaY * 0.001);
  schedule();
}, { passive: false });

$('play').addEventListener('click', () => {
  send({ type: viewer.stats && viewer.stats.playing ? 'pause' : 'play' });
});

// While the slider is held, frames do not move it under the pointer.
let scrubbing = false;
$('scrub').addEventListener('pointerdown', () => { scrubbing = true; });
$('scrub').addEventListener('pointerup', () => { scrubbing = false; });
$('scrub').addEventListener('input', () => send({ type: 'seek', time: Number($('scrub').value) }));

$('integrator').addEventListener('change', () => send({ type: 'settings', integrator: $('integrator').value }));
$('controls').addEventListener('submit', (event) => {
  event.preventDefault();
  const budget = Number($('budget').value);
  const settings = { type: 'settings', accel: $('accel').value.trim() };
  if (Number.isInteger(budget) && budget > 0) settings.budget = budget;
  send(settings);
});
$('reset').addEventListener('click', () => send({ type: 'reset_camera' }));

connect();
