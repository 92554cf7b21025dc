// The gpufleet dashboard: a single-page app over the controller's /v1 API (docs/api.md).
//
// No framework and no build step: the browser runs this file as it is. Pages are picked by the
// URL's hash (#/jobs/12); each page mounts into <main>, refreshes itself every few seconds while
// it is shown, and stops (timers, long-polls) when another page replaces it.
//
// Security: the token the user types is kept in sessionStorage (gone when the tab closes) and
// sent only to this controller's /v1 routes. Every value from the API is put into the page as
// text (textContent, attributes), never parsed as HTML.
'use strict';

(() => {
  const TOKEN_KEY = 'gpufleet.token';
  const LOGIN_NOTE_KEY = 'gpufleet.login-note';
  const LOGIN_NOTE_KIND_KEY = 'gpufleet.login-note-kind';
  const REFRESH_MS = 5000;
  const JOB_REFRESH_MS = 3000;
  const LOG_WAIT_MS = 5000;
  const LOG_KEEP_CHARS = 2000000;
  const CHART_SAMPLES = 900;  // a 3-hour record at 15 s, and live samples after it
  const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
  const JOB_STATES = ['pending', 'starting', 'running', 'stopping', 'succeeded', 'failed', 'cancelled', 'preempted'];
  const SERIES_COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];

  // --- DOM -------------------------------------------------------------------------------------

  // h('a', {href: '#/', class: 'x', onclick: fn}, 'text', child, [more]): an element. Strings
  // become text nodes; null, undefined and false are left out.
  function h(tag, attrs, ...children) {
    return build(document.createElement(tag), attrs, children);
  }

  function svg(tag, attrs, ...children) {
    return build(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children);
  }

  function build(el, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') {
        el.addEventListener(k.slice(2), v);
      } else if (k === 'text') {
        el.textContent = String(v);
      } else {
        el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) append(el, c);
      else el.append(c instanceof Node ? c : String(c));
    }
  }

  function replace(el, ...children) {
    el.replaceChildren();
    append(el, children);
  }

  // --- Formatting ------------------------------------------------------------------------------

  const money = new Intl.NumberFormat('en-US', {style: 'currency', currency: 'USD'});
  // Amounts below a cent (a budget's soft limit of $0.001) say so instead of "$0.00".
  const fmtMoney = (micros) => {
    const n = Number(micros) || 0;
    return n > 0 && n < 5000 ? '< $0.01' : money.format(n / 1e6);
  };
  // A limit as it was set: every digit it has ($0.005), where an amount rounds to the cent.
  const limitMoney = new Intl.NumberFormat('en-US',
    {style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 6});
  const fmtLimit = (micros) => limitMoney.format((Number(micros) || 0) / 1e6);
  // API messages start in lower case ("job 12 does not exist"); shown alone, they read as sentences.
  const sentence = (text) => (text ? text.charAt(0).toUpperCase() + text.slice(1) : text);

  // API times are integer milliseconds ("_ms" fields); alerts give ISO-8601 strings. Both here.
  function toMillis(v) {
    if (v === null || v === undefined || v === '') return null;
    if (typeof v === 'number') return v;
    const t = Date.parse(v);
    return Number.isNaN(t) ? null : t;
  }

  function fmtTime(v) {
    const t = toMillis(v);
    if (t === null || t <= 0) return '—';
    const d = new Date(t);
    const today = new Date().toDateString() === d.toDateString();
    return today ? d.toLocaleTimeString() : d.toLocaleString();
  }

  function fmtDuration(ms) {
    if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return `${s} s`;
    if (s < 600) return `${Math.floor(s / 60)} min ${s % 60} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  }

  function fmtAgo(v) {
    const t = toMillis(v);
    if (t === null || t <= 0) return '—';
    const d = Date.now() - t;
    return d < 0 ? `in ${fmtDuration(-d)}` : `${fmtDuration(d)} ago`;
  }

  // "2 GPUs" / "2 × 4 GPUs" (nodes × per node) / "0.5 GPU".
  function fmtGpus(job) {
    const per = Number(job.gpus) || 0;
    const nodes = Number(job.nodes) || 1;
    const unit = per * nodes === 1 ? 'GPU' : 'GPUs';
    if (per === 0) return 'CPU only';
    return nodes > 1 ? `${nodes} × ${per} ${unit}` : `${per} ${unit}`;
  }

  function fmtMib(mib) {
    const n = Number(mib) || 0;
    return n >= 1024 ? `${(n / 1024).toFixed(1)} GiB` : `${n} MiB`;
  }

  function fmtBytes(bytes) {
    let v = Number(bytes) || 0;
    if (v < 1024) return `${v} B`;
    const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let u = -1;
    while (v >= 1023.95 && u + 1 < units.length) { v /= 1024; u += 1; }
    return `${v.toFixed(1)} ${units[u]}`;
  }

  const stateBadge = (state, extra) =>
    h('span', {class: `badge state-${state}`, ...extra}, state);

  // --- The API ---------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  const token = () => sessionStorage.getItem(TOKEN_KEY);

  // fetch() of a /v1 route with the token. Resolves to the parsed body; rejects with an ApiError
  // that carries the API's {"error": {code, message}}. A 401 also logs out and shows the log-in
  // form with the reason.
  async function api(path, {method = 'GET', signal, body} = {}) {
    const t = token();
    if (!t) {
      toLogin('Log in with a token to continue.');
      throw new ApiError(401, 'unauthenticated', 'not logged in');
    }
    const headers = {Authorization: `Bearer ${t}`};
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(`/v1${path}`, {
        method, signal, headers, cache: 'no-store',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, 'unreachable', 'cannot reach the controller (is it running?)');
    }
    const text = await res.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (e) {
      data = null;
    }
    if (!res.ok) {
      const err = data && data.error ? data.error : {};
      const message = err.message || text.trim() || res.statusText || 'request failed';
      const e = new ApiError(res.status, err.code || `http_${res.status}`, message);
      if (res.status === 401) toLogin(`The controller refused the token: ${message}`);
      throw e;
    }
    return data;
  }

  // A readable box for an error: the API's message, then its HTTP status and code.
  function errorBox(err, what) {
    const e = err instanceof ApiError ? err : new ApiError(0, 'error', String(err && err.message || err));
    return h('div', {class: 'error', role: 'alert'},
      what ? h('strong', {}, `${what}: `) : null,
      what ? e.message : sentence(e.message),
      e.status ? h('span', {class: 'error-code'}, ` (HTTP ${e.status} ${e.code})`) : null);
  }

  // --- Pages: shared parts ---------------------------------------------------------------------

  // A titled box whose body a refresh replaces; an error shows in place of its content.
  function panel(title, {id, cls, actions} = {}) {
    const body = h('div', {class: 'panel-body'});
    const el = h('section', {class: `panel ${cls || ''}`, id},
      h('div', {class: 'panel-head'}, h('h2', {}, title), actions || null), body);
    return {
      el,
      body,
      show: (...children) => replace(body, ...children),
      fail: (err, what) => replace(body, errorBox(err, what)),
    };
  }

  function table(columns, rows, {empty = 'Nothing here.', rowAttrs} = {}) {
    if (!rows.length) return h('p', {class: 'muted empty'}, empty);
    return h('table', {class: 'grid'},
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', {class: c.cls}, c.title)))),
      h('tbody', {}, rows.map((r) =>
        h('tr', rowAttrs ? rowAttrs(r) : {}, columns.map((c) => {
          // A long text cell (a name; at most one link in it) is cut with an ellipsis (app.css
          // td.clip) and its title holds it whole; a cell of several links or buttons is not cut.
          const cell = h('td', {class: c.cls}, c.cell(r));
          if (cell.textContent.length > 40 && cell.querySelectorAll('a, button').length <= 1 && !cell.classList.contains('wrap')) {
            cell.classList.add('clip');
            cell.title = cell.textContent;
          }
          return cell;
        })))));
  }

  const jobLink = (id, label) => h('a', {href: `#/jobs/${id}`}, label === undefined ? `#${id}` : label);

  // "dev-1: GPU 0,1; dev-2: GPU 0,1" from a placement, with node ids turned into names.
  function fmtPlacement(placement, nodeNames) {
    if (!placement || !placement.parts || !placement.parts.length) return '—';
    return placement.parts
      .map((p) => `${nodeNames.get(p.node) || `node ${p.node}`}: ${p.gpus && p.gpus.length ? `GPU ${p.gpus.join(',')}` : 'no GPU'}`)
      .join('; ');
  }

  const settle = (promise) => promise.then((value) => ({value}), (error) => ({error}));

  // A promise that resolves after ms, or at once when the signal aborts (the page went away).
  function pause(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      if (signal) signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, {once: true});
    });
  }

  // --- Heat-map --------------------------------------------------------------------------------

  const utilColor = (v) => `hsl(212, 70%, ${Math.round(96 - 0.58 * clamp(v, 0, 100))}%)`;
  // Cool blue at 30 °C and below, through yellow, to red at 90 °C and above.
  const tempColor = (c) => `hsl(${Math.round(210 - (210 * (clamp(c, 30, 90) - 30)) / 60)}, 75%, 62%)`;
  const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, Number(v) || 0));

  const METRICS = {
    util: {
      title: 'GPU utilisation', key: 'util_pct', unit: '%', color: utilColor,
      dark: (v) => clamp(v, 0, 100) > 55, legend: ['0 %', '100 %'], stops: [0, 50, 100],
    },
    temp: {
      title: 'GPU temperature', key: 'temperature_c', unit: '°', color: tempColor,
      dark: () => false, legend: ['30 °C', '90 °C'], stops: [30, 60, 90],
    },
  };

  // Which jobs hold each GPU: "nodeId:gpu" -> job ids, ascending, from the running jobs'
  // placements (several jobs: slices of one GPU).
  function gpuOwners(jobs) {
    const owners = new Map();
    for (const j of jobs) {
      for (const p of (j.placement && j.placement.parts) || []) {
        for (const g of p.gpus || []) {
          const key = `${p.node}:${g}`;
          if (!owners.has(key)) owners.set(key, []);
          owners.get(key).push(j.id);
        }
      }
    }
    for (const ids of owners.values()) ids.sort((a, b) => a - b);
    return owners;
  }

  // Nodes down, GPUs across: one cell per GPU, coloured by the metric.
  function heatmap(metric, nodes, owners) {
    const m = METRICS[metric];
    const width = Math.max(1, ...nodes.map((n) => Math.max(n.gpus || 0, (n.telemetry || []).length)));
    const rows = nodes.map((n) => {
      const cells = [];
      for (let g = 0; g < width; g++) {
        if (g >= (n.gpus || 0) && g >= (n.telemetry || []).length) {
          cells.push(h('div', {class: 'heat-cell heat-none'}));
          continue;
        }
        const s = (n.telemetry || [])[g];
        const held = owners.get(`${n.id}:${g}`) || [];
        const stale = n.state === 'lost' || n.state === 'gone' || !s;
        const cell = h('div', {
          class: `heat-cell${stale ? ' heat-stale' : ''}${!stale && m.dark(s[m.key]) ? ' heat-dark' : ''}`,
          'data-node': n.name, 'data-gpu': g,
          title: s
            ? `${n.name} GPU ${g}: ${s.util_pct} % busy, ${s.temperature_c} °C, ${fmtMib(s.mem_used_mib)}, ${s.power_w} W` +
              (held.length ? `, ${held.length > 1 ? 'jobs' : 'job'} ${held.join(', ')}` : ', no job')
            : `${n.name} GPU ${g}: no telemetry`,
        },
        h('span', {class: 'heat-value'}, s && !stale ? `${s[m.key]}${m.unit}` : '–'),
        ...held.map((id) => h('a', {class: 'heat-job', href: `#/jobs/${id}`}, `#${id}`)));
        if (!stale) cell.style.background = m.color(s[m.key]);
        cells.push(cell);
      }
      return h('div', {class: 'heat-row'},
        h('a', {class: 'heat-label', href: '#/nodes', title: `${n.name}: ${n.state}, ${n.gpu_model}`},
          h('span', {class: `dot node-${n.state}`}), n.name),
        h('div', {class: 'heat-cells'}, cells));
    });
    const bar = h('span', {class: 'legend-bar'});
    bar.style.background = `linear-gradient(to right, ${m.stops.map((v) => m.color(v)).join(', ')})`;
    return h('div', {class: 'heatmap', id: `heatmap-${metric}`},
      h('div', {class: 'heat-title'}, m.title,
        h('span', {class: 'legend'}, m.legend[0], bar, m.legend[1])),
      rows.length ? rows : h('p', {class: 'muted'}, 'No nodes have joined yet.'));
  }

  // --- Line chart (the job page's GPU utilisation) ---------------------------------------------

  // series: [{label, color, points: [[t_ms, value], ...]}]; y from 0 to 100.
  function lineChart(series, {width = 640, height = 120, unit = '%'} = {}) {
    const pad = {l: 36, r: 8, t: 8, b: 20};
    const all = series.flatMap((s) => s.points);
    const root = svg('svg', {viewBox: `0 0 ${width} ${height}`, class: 'chart', role: 'img',
      'aria-label': 'GPU utilisation over time'});
    const t1 = all.length ? Math.max(...all.map((p) => p[0])) : Date.now();
    // From the first sample to the last, but at least 20 s, so a new page's line is not a dot.
    const t0 = Math.min(all.length ? Math.min(...all.map((p) => p[0])) : t1, t1 - 20000);
    const x = (t) => pad.l + ((t - t0) / Math.max(1, t1 - t0)) * (width - pad.l - pad.r);
    const y = (v) => pad.t + (1 - clamp(v, 0, 100) / 100) * (height - pad.t - pad.b);
    for (const v of [0, 25, 50, 75, 100]) {
      root.append(
        svg('line', {x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v), class: 'chart-grid'}),
        svg('text', {x: pad.l - 4, y: y(v) + 4, class: 'chart-axis', 'text-anchor': 'end'}, `${v}${unit}`));
    }
    root.append(
      svg('text', {x: pad.l, y: height - 4, class: 'chart-axis'}, new Date(t0).toLocaleTimeString()),
      svg('text', {x: width - pad.r, y: height - 4, class: 'chart-axis', 'text-anchor': 'end'},
        new Date(t1).toLocaleTimeString()));
    for (const s of series) {
      if (!s.points.length) continue;
      const d = s.points.map((p, i) => `${i ? 'L' : 'M'}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ');
      root.append(svg('path', {d, fill: 'none', stroke: s.color, 'stroke-width': 2, class: 'chart-line'}));
      const last = s.points[s.points.length - 1];
      root.append(svg('circle', {cx: x(last[0]), cy: y(last[1]), r: 3, fill: s.color}));
    }
    return root;
  }

  // --- Log in ----------------------------------------------------------------------------------

  // Sends the user to the log-in form (remembering where they were), with a note saying why.
  function toLogin(note, kind = 'error') {
    sessionStorage.removeItem(TOKEN_KEY);
    if (note) {
      sessionStorage.setItem(LOGIN_NOTE_KEY, note);
      sessionStorage.setItem(LOGIN_NOTE_KIND_KEY, kind);
    }
    const here = location.hash.startsWith('#/login') ? '' : location.hash.slice(1);
    location.hash = `#/login${here && here !== '/' ? `?next=${encodeURIComponent(here)}` : ''}`;
  }

  function loginPage(root, {query}) {
    const note = sessionStorage.getItem(LOGIN_NOTE_KEY);
    const kind = sessionStorage.getItem(LOGIN_NOTE_KIND_KEY) === 'info' ? 'info' : 'error';
    sessionStorage.removeItem(LOGIN_NOTE_KEY);
    sessionStorage.removeItem(LOGIN_NOTE_KIND_KEY);
    const input = h('input', {id: 'login-token', type: 'password', autocomplete: 'off', spellcheck: 'false',
      placeholder: 'gf_user_…', required: true, 'aria-label': 'API token'});
    const status = h('div', {id: 'login-status'}, note ? h('div', {class: kind}, note) : null);
    const button = h('button', {id: 'login-submit', type: 'submit', class: 'primary'}, 'Log in');
    const form = h('form', {class: 'login', id: 'login-form'},
      h('h1', {}, 'Log in to gpufleet'),
      h('label', {for: 'login-token'}, 'API token'),
      input,
      h('p', {class: 'muted small'},
        'A user token (gf_user_…). `gpufleet dev` writes the first admin token to the CLI config ',
        h('code', {}, '~/.config/gpufleet/config.yaml'), '; an admin makes more with ',
        h('code', {}, 'gpufleet token create'), '. The token stays in this browser tab only.'),
      button, status);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      button.disabled = true;
      replace(status, h('span', {class: 'muted'}, 'Checking the token…'));
      // Any read a user token may make tells whether the controller takes the token; a 403 means
      // it does, for a role that cannot read the queue, and the pages say what it may not see.
      try {
        const res = await fetch('/v1/queue?limit=1', {headers: {Authorization: `Bearer ${t}`}, cache: 'no-store'});
        if (res.status === 401) {
          const body = await res.json().catch(() => null);
          throw new ApiError(401, 'unauthenticated', (body && body.error && body.error.message) || 'the token was refused');
        }
        sessionStorage.setItem(TOKEN_KEY, t);
        location.hash = query.get('next') ? `#${query.get('next')}` : '#/';
      } catch (e) {
        replace(status, errorBox(e instanceof ApiError ? e : new ApiError(0, 'unreachable',
          'cannot reach the controller (is it running?)'), 'Log-in failed'));
        button.disabled = false;
      }
    });
    replace(root, form);
    input.focus();
    return {};
  }

  // --- Overview --------------------------------------------------------------------------------

  function overviewPage(root) {
    const stats = h('div', {class: 'stats', id: 'stats'});
    const heat = panel('Nodes × GPUs', {id: 'heat-panel', cls: 'wide'});
    const running = panel('Running jobs', {id: 'running-jobs'});
    const queue = panel('Queue', {id: 'queue'});
    const spend = panel('Spend vs budget', {id: 'spend'});
    const alerts = panel('Alerts', {id: 'alerts'});
    replace(root, stats, h('div', {class: 'columns'},
      h('div', {class: 'col-main'}, heat.el, running.el, queue.el),
      h('div', {class: 'col-side'}, alerts.el, spend.el)));

    async function refresh(signal) {
      const [nodes, q, cost, al] = await Promise.all([
        settle(api('/nodes', {signal})), settle(api('/queue?limit=1000', {signal})),
        settle(api('/cost', {signal})), settle(api('/alerts', {signal}))]);
      const nodeList = nodes.value ? nodes.value.nodes : [];
      const jobs = q.value ? q.value.jobs : [];
      const names = new Map(nodeList.map((n) => [n.id, n.name]));
      const active = jobs.filter((j) => j.state !== 'pending');
      const pending = jobs.filter((j) => j.state === 'pending');

      // Summary numbers. The queue page holds at most 1,000 jobs, running ones first: past that the
      // counts come from its total.
      const up = nodeList.filter((n) => n.state === 'up' || n.state === 'draining');
      // Nodes that take new work (as the controller's TakesWork): up, disk with room, accepted.
      const working = up.filter((n) => n.state === 'up' && !n.storage_fault &&
        n.acceptance !== 'checking' && n.acceptance !== 'quarantined');
      const gpus = up.reduce((a, n) => a + (n.gpus || 0), 0);
      const used = up.reduce((a, n) => a + (n.gpus_used || 0), 0);
      const workingGpus = working.reduce((a, n) => a + (n.gpus || 0), 0);
      const total = q.value && typeof q.value.total === 'number' ? q.value.total : jobs.length;
      const cut = total > jobs.length;  // not every job is on the page
      const runningText = cut && !pending.length ? `${active.length}+` : String(active.length);
      const pendingText = !cut ? String(pending.length)
        : pending.length ? String(total - active.length) : `≤ ${total - active.length}`;
      const resting = up.length - working.length;  // draining, or no room on their disks
      const firing = al.value ? (al.value.alerts || []).filter((a) => a.state === 'firing') : [];
      const stat = (label, value, id, cls) => h('div', {class: `stat ${cls || ''}`, id},
        h('div', {class: 'stat-value'}, value), h('div', {class: 'stat-label'}, label));
      replace(stats,
        stat(resting ? `nodes taking work (${resting} not: draining, no room or not accepted)` : 'nodes up',
          nodes.value ? `${resting ? working.length : up.length} / ${nodeList.length}` : '—', 'stat-nodes'),
        // GPUs of nodes that take no new work (draining, no room, not accepted) count in the total, and
        // the label says how many of them there are: they cannot take the pending jobs.
        stat(gpus > workingGpus ? `GPUs in use (${gpus - workingGpus} on nodes not taking work)` : 'GPUs in use',
          nodes.value ? `${used} / ${gpus}` : '—', 'stat-gpus'),
        stat('running jobs', q.value ? runningText : '—', 'stat-running'),
        stat('pending jobs', q.value ? pendingText : '—', 'stat-pending'),
        stat('spent, all time', cost.value ? fmtMoney((cost.value.total_micros || 0) + (cost.value.rented_idle_micros || 0)) : '—', 'stat-spent'),
        stat('alerts firing', al.value ? String(firing.length) : '—', 'stat-alerts', firing.length ? 'stat-bad' : ''));

      if (nodes.error) heat.fail(nodes.error, 'Nodes');
      else {
        const owners = gpuOwners(active);
        heat.show(h('div', {class: 'heatmaps'}, heatmap('util', nodeList, owners), heatmap('temp', nodeList, owners)));
      }

      if (q.error) {
        running.fail(q.error, 'Queue');
        queue.fail(q.error, 'Queue');
      } else {
        running.show(table([
          {title: 'Job', cell: (j) => jobLink(j.id)},
          {title: 'Name', cell: (j) => jobLink(j.id, j.name)},
          {title: 'Team', cell: (j) => j.team},
          {title: 'State', cell: (j) => stateBadge(j.state)},
          {title: 'GPUs', cell: (j) => fmtGpus(j)},
          {title: 'Where', cls: 'wrap', cell: (j) => fmtPlacement(j.placement, names)},
          {title: 'Since', cell: (j) => fmtAgo(j.updated_ms)},
        ], active, {empty: 'No job is running.', rowAttrs: (j) => ({'data-job': j.id})}));
        queue.show(table([
          {title: '#', cell: (j) => String(j.position)},
          {title: 'Job', cell: (j) => jobLink(j.id)},
          {title: 'Name', cell: (j) => jobLink(j.id, j.name)},
          {title: 'Team', cell: (j) => j.team},
          {title: 'GPUs', cell: (j) => fmtGpus(j)},
          {title: 'Waiting', cell: (j) => fmtAgo(j.submitted_ms)},
          {title: 'Why', cls: 'wrap', cell: (j) => j.reason || '—'},
        ], pending, {empty: 'The queue is empty.', rowAttrs: (j) => ({'data-job': j.id})}));
      }

      if (cost.error) spend.fail(cost.error, 'Costs');
      else spend.show(spendBars(cost.value.teams || []));

      if (al.error && al.error.status === 404) {
        alerts.show(h('p', {class: 'muted'}, 'This controller does not serve alerts.'));
      } else if (al.error) {
        alerts.fail(al.error, 'Alerts');
      } else if (al.value.enabled === false) {
        alerts.show(h('p', {class: 'muted'}, 'The alert engine is turned off on this controller.'));
      } else {
        alerts.show(alertList(al.value.alerts || []));
      }
      for (const r of [nodes, q, cost]) if (r.error) throw r.error;
    }
    return {refresh, interval: REFRESH_MS};
  }

  // One bar per team: spend against its hard budget (or soft, when only that is set), the soft
  // limit as a mark.
  function spendBars(teams) {
    if (!teams.length) {
      return h('p', {class: 'muted empty'},
        'No spend yet that this token may see (a team\'s token sees its own team only).');
    }
    return h('div', {class: 'spend-list'}, teams.map((t) => {
      const b = t.budget || null;
      const limit = b ? (b.hard_micros || b.soft_micros || 0) : 0;
      const cls = t.over_hard ? 'over-hard' : t.over_soft ? 'over-soft' : 'ok';
      const fill = h('span', {class: `bar-fill ${cls}${t.spent_micros > 0 ? ' some' : ''}`});
      const bar = h('div', {class: 'bar', title: limit ? `${Math.round((100 * t.spent_micros) / limit)} % of the budget` : ''}, fill);
      fill.style.width = `${limit ? clamp((100 * t.spent_micros) / limit, 0, 100) : 0}%`;
      if (b && b.soft_micros && b.hard_micros) {
        const mark = h('span', {class: 'bar-mark', title: `soft limit ${fmtLimit(b.soft_micros)}`});
        mark.style.left = `${clamp((100 * b.soft_micros) / b.hard_micros, 0, 100)}%`;
        bar.append(mark);
      }
      const what = limit
        ? `${fmtMoney(t.spent_micros)} of ${fmtLimit(limit)}${b.hard_micros ? '' : ' (soft)'}`
        : `${fmtMoney(t.spent_micros)} · no budget`;
      return h('div', {class: 'spend', 'data-team': t.team},
        h('div', {class: 'spend-head'}, h('strong', {}, t.team), h('span', {}, what)),
        limit ? bar : null,
        h('div', {class: 'muted small'},
          `${fmtMoney(t.rate_micros_per_hour)}/h now`,
          b && b.period && b.period !== 'none' ? ` · ${b.period} budget` : '',
          t.over_hard ? ' · over the hard limit' : t.over_soft ? ' · over the soft limit' : ''));
    }));
  }

  const SEVERITY_ORDER = {critical: 0, warning: 1, info: 2};
  const ALERT_STATE_ORDER = {firing: 0, pending: 1, resolved: 2};

  function alertList(alerts) {
    const open = alerts.filter((a) => a.state !== 'resolved');
    const resolved = alerts.length - open.length;
    open.sort((a, b) => (ALERT_STATE_ORDER[a.state] ?? 3) - (ALERT_STATE_ORDER[b.state] ?? 3) ||
      (SEVERITY_ORDER[a.severity] ?? 3) - (SEVERITY_ORDER[b.severity] ?? 3));
    const items = open.map((a) => h('li', {class: `alert alert-${a.state}`, 'data-alert': a.name},
      h('div', {class: 'alert-head'},
        h('span', {class: `badge sev-${a.severity}`}, a.severity || 'alert'),
        h('strong', {}, a.name),
        h('span', {class: 'muted small'},
          a.state === 'firing' ? `firing ${fmtAgo(a.fired_at || a.started_at)}` : `pending since ${fmtAgo(a.started_at)}`)),
      a.message ? h('div', {}, a.message) : null,
      h('div', {class: 'chips'}, Object.entries(a.labels || {}).map(([k, v]) => h('span', {class: 'chip'}, `${k}=${v}`)))));
    return h('div', {},
      items.length ? h('ul', {class: 'alerts'}, items) : h('p', {class: 'ok-text'}, 'No alert is firing.'),
      resolved ? h('p', {class: 'muted small'}, `${resolved} resolved recently.`) : null);
  }

  // --- Jobs ------------------------------------------------------------------------------------

  function jobsPage(root, {query}) {
    const filters = {state: query.get('state') || '', team: query.get('team') || '', name: query.get('name') || ''};
    const state = h('select', {id: 'filter-state', 'aria-label': 'State'},
      h('option', {value: ''}, 'any state'),
      h('option', {value: 'pending,starting,running,stopping,preempted'}, 'not ended'),
      JOB_STATES.map((s) => h('option', {value: s}, s)));
    state.value = filters.state;
    if (state.value !== filters.state) state.value = '';
    const team = h('input', {id: 'filter-team', type: 'search', placeholder: 'team', value: filters.team, 'aria-label': 'Team'});
    const name = h('input', {id: 'filter-name', type: 'search', placeholder: 'name contains', value: filters.name, 'aria-label': 'Name'});
    const list = panel('Jobs', {id: 'jobs'});
    replace(root, h('form', {class: 'filters', id: 'job-filters'},
      h('label', {}, 'State ', state), h('label', {}, 'Team ', team), h('label', {}, 'Name ', name)), list.el);

    let jobs = null;
    let older = null;  // the next page's cursor
    let extra = [];    // older pages the user asked for
    const render = () => {
      const needle = filters.name.toLowerCase();
      const rows = jobs.concat(extra).filter((j) => !needle || j.name.toLowerCase().includes(needle));
      list.show(table([
        {title: 'Job', cell: (j) => jobLink(j.id)},
        {title: 'Name', cell: (j) => jobLink(j.id, j.name)},
        {title: 'Team', cell: (j) => j.team},
        {title: 'State', cell: (j) => stateBadge(j.state)},
        {title: 'GPUs', cell: (j) => fmtGpus(j)},
        {title: 'Submitted', cell: (j) => fmtTime(j.submitted_ms)},
        {title: 'Updated', cell: (j) => fmtAgo(j.updated_ms)},
        {title: 'Reason', cls: 'wrap', cell: (j) => j.reason || '—'},
      ], rows, {empty: 'No job matches.', rowAttrs: (j) => ({'data-job': j.id})}),
      older ? h('button', {type: 'button', class: 'more', onclick: loadOlder}, 'Load older jobs') : null);
    };
    const params = (cursor) => {
      const p = new URLSearchParams({limit: '500'});
      if (filters.team) p.set('team', filters.team);
      if (filters.state) p.set('state', filters.state);
      if (cursor) p.set('cursor', cursor);
      return p;
    };
    async function loadOlder() {
      try {
        const r = await api(`/jobs?${params(older)}`);
        extra = extra.concat(r.jobs || []);
        older = r.next_cursor || null;
        render();
      } catch (e) {
        list.fail(e, 'Jobs');
      }
    }
    async function refresh(signal) {
      try {
        const r = await api(`/jobs?${params()}`, {signal});
        jobs = r.jobs || [];
        if (!extra.length) older = r.next_cursor || null;
        render();
      } catch (e) {
        if (e.name !== 'AbortError') list.fail(e, 'Jobs');
        throw e;
      }
    }
    // Filters change the URL in place (so it can be shared) without remounting the page.
    let timer = null;
    const changed = () => {
      filters.state = state.value;
      filters.team = team.value.trim();
      filters.name = name.value.trim();
      const p = new URLSearchParams(Object.entries(filters).filter(([, v]) => v));
      history.replaceState(null, '', `#/jobs${p.toString() ? `?${p}` : ''}`);
      extra = [];
      clearTimeout(timer);
      timer = setTimeout(() => page.kick(), 250);
    };
    state.addEventListener('change', changed);
    team.addEventListener('input', changed);
    name.addEventListener('input', changed);
    const page = {refresh, interval: REFRESH_MS, stop: () => clearTimeout(timer)};
    return page;
  }

  // --- One job ---------------------------------------------------------------------------------

  function jobPage(root, {id}) {
    const title = h('h1', {id: 'job-title'}, `Job ${id}`);
    const badge = h('span', {id: 'job-state', class: 'badge'}, '…');
    const actions = h('div', {class: 'job-actions', id: 'job-actions'});
    const notice = h('div', {id: 'job-notice'});
    const summary = panel('Job', {id: 'job-summary'});
    const placement = panel('Placement', {id: 'job-placement'});
    const chart = panel('GPU utilisation over this run', {id: 'job-gpus'});
    const explain = panel('Explain', {id: 'job-explain'});
    const history = panel('History', {id: 'job-history'});
    const attemptSelect = h('select', {id: 'log-attempt', 'aria-label': 'Attempt', hidden: true});
    const follow = h('input', {type: 'checkbox', id: 'log-follow', checked: true});
    const logs = panel('Logs', {id: 'job-logs', cls: 'wide',
      actions: h('div', {class: 'log-tools'}, attemptSelect,
        h('label', {class: 'small'}, follow, ' scroll with new output'))});
    replace(root,
      h('div', {class: 'job-head'}, h('a', {href: '#/jobs', class: 'back'}, '← Jobs'), title, badge, actions),
      notice,
      h('div', {class: 'columns'},
        h('div', {class: 'col-main'}, summary.el, logs.el, chart.el),
        h('div', {class: 'col-side'}, placement.el, explain.el, history.el)));

    const controller = new AbortController();  // stops the log follower when the page goes
    let job = null;
    let names = new Map();
    const samples = new Map();  // "node GPU g" -> [[t, util, temp], ...]
    let seededAttempt = null;  // the attempt whose recorded GPU history is in samples
    let confirming = false;
    let costHidden = false;  // the token may not read this job's team's costs
    let logAttempt = null;  // the attempt the follower reads; null: the job's current one
    let pinnedAttempt = null;  // an older attempt the user picked

    function renderActions() {
      if (!job) return;
      if (TERMINAL.has(job.state)) {
        replace(actions);
        return;
      }
      if (!confirming) {
        replace(actions, h('button', {type: 'button', id: 'cancel-job', class: 'danger',
          onclick: () => { confirming = true; renderActions(); }}, 'Cancel job'));
        return;
      }
      replace(actions,
        h('span', {class: 'confirm-text'}, `Cancel job ${id}? It gets its stop signal, then SIGKILL after its grace period.`),
        h('button', {type: 'button', id: 'cancel-confirm', class: 'danger', onclick: doCancel}, 'Yes, cancel it'),
        h('button', {type: 'button', id: 'cancel-keep', onclick: () => { confirming = false; renderActions(); }}, 'Keep it'));
    }

    async function doCancel(ev) {
      ev.target.disabled = true;
      try {
        await api(`/jobs/${id}/cancel`, {method: 'POST'});
        replace(notice, h('div', {class: 'info'}, `Cancel requested for job ${id}.`));
      } catch (e) {
        replace(notice, errorBox(e, 'Cancel failed'));
      }
      confirming = false;
      page.kick();
    }

    function renderSummary(cost) {
      const file = job.job_file || {};
      const run = Array.isArray(file.run) ? file.run.join(' ') : file.run;
      // Two pairs to a row; the command takes a row of its own.
      const kv = [
        ['Team', job.team], ['Priority', String(job.priority)],
        ['GPUs', `${fmtGpus(job)}${job.gpu_type && job.gpu_type.length ? ` (${job.gpu_type.join(' or ')})` : ''}`],
        ['Attempt', String(job.attempt)],
        ['Submitted', `${fmtTime(job.submitted_ms)} (${fmtAgo(job.submitted_ms)})`],
        ['Updated', `${fmtTime(job.updated_ms)} (${fmtAgo(job.updated_ms)})`],
        ['Cost', cost],
        // (The exit code only where the reason does not say it already.)
        ['Reason', `${job.reason || '—'}${job.exit_code !== undefined && job.exit_code !== null &&
          !(job.reason || '').includes(`code ${job.exit_code}`) && !(job.reason || '').includes('the reason is shown to that team')
          ? ` (exit code ${job.exit_code})` : ''}`],
        run ? ['Command', h('code', {class: 'cmd'}, run), true] : null,
      ].filter(Boolean);
      summary.show(h('dl', {class: 'kv'}, kv.map(([k, v, wide]) =>
        [h('dt', {class: wide ? 'kv-row' : null}, k), h('dd', {class: wide ? 'kv-wide' : null}, v)])),
        job.hidden ? h('p', {class: 'muted small'}, job.hidden) : null);
    }

    function renderPlacement() {
      const parts = (job.placement && job.placement.parts) || [];
      placement.show(parts.length
        ? table([
          {title: 'Part', cell: (p) => String(p.i)},
          {title: 'Node', cell: (p) => names.get(p.node) || `node ${p.node}`},
          {title: 'GPUs', cell: (p) => (p.gpus || []).join(', ') || '—'},
          {title: 'CPU', cell: (p) => (p.cpu_milli ? `${p.cpu_milli / 1000}` : '—')},
          {title: 'Memory', cell: (p) => (p.mem_mib ? fmtMib(p.mem_mib) : '—')},
        ], parts.map((p, i) => ({...p, i})))
        : h('p', {class: 'muted empty'}, job.state === 'pending' ? 'Not placed yet.' : 'No placement.'));
      // (A job that holds no GPU has none, whatever its node has.)
      const holdsGpus = parts.some((p) => (p.gpus || []).length > 0);
      if (job.placement && job.placement.gpu_model && holdsGpus) {
        placement.body.prepend(h('p', {class: 'small'}, `GPU model: ${job.placement.gpu_model}`));
      }
    }

    // The controller's record of this run's GPUs (a point per 15 s), so the chart starts at the
    // run's start and not when the page was opened.
    async function seedGpus(signal) {
      seededAttempt = job.attempt;
      let r;
      try {
        r = await api(`/jobs/${id}/gpus`, {signal});
      } catch (e) {
        if (e.name === 'AbortError') throw e;
        return;  // an older controller: live samples only
      }
      samples.clear();
      for (const s of r.series || []) {
        if (!(s.points || []).length) continue;
        samples.set(`${s.node} GPU ${s.gpu}`, s.points.map((p) => [p[0], p[1], p[3]]).slice(-CHART_SAMPLES));
      }
    }

    function sampleGpus(nodes) {
      const now = Date.now();
      const byId = new Map(nodes.map((n) => [n.id, n]));
      const running = job && !TERMINAL.has(job.state) && job.state !== 'pending';
      for (const p of (running && job.placement && job.placement.parts) || []) {
        const n = byId.get(p.node);
        for (const g of p.gpus || []) {
          const s = n && (n.telemetry || [])[g];
          if (!s) continue;
          const key = `${names.get(p.node) || p.node} GPU ${g}`;
          const list = samples.get(key) || [];
          list.push([now, s.util_pct, s.temperature_c]);
          if (list.length > CHART_SAMPLES) list.shift();
          samples.set(key, list);
        }
      }
      if (!samples.size) {
        chart.show(h('p', {class: 'muted empty'},
          running ? 'No telemetry from this job\'s GPUs yet.' : 'The job holds no GPU now.'));
        return;
      }
      const series = [...samples.entries()].map(([label, pts], i) =>
        ({label, color: SERIES_COLORS[i % SERIES_COLORS.length], points: pts.map((p) => [p[0], p[1]]), last: pts[pts.length - 1]}));
      chart.show(lineChart(series, {width: Math.max(320, chart.body.clientWidth - 24)}), h('div', {class: 'chart-legend'}, series.map((s) => {
        const sw = h('span', {class: 'swatch'});
        sw.style.background = s.color;
        return h('span', {class: 'legend-item'}, sw, `${s.label}: ${s.last[1]} %, ${s.last[2]} °C`);
      })));
    }

    function renderExplain(ex) {
      if (ex.error) return explain.fail(ex.error, 'Explain');
      const e = ex.value;
      const facts = [];
      if (e.phase) facts.push(`phase ${e.phase}`);
      if (e.position) facts.push(`position ${e.position} of ${e.queue_length}`);
      if (e.can_start_now !== undefined && e.phase === 'pending') facts.push(e.can_start_now ? 'can start now' : 'cannot start now');
      if (e.ever === false) facts.push('can never run on this cluster as it is');
      if (e.earliest_start_ms) facts.push(`estimated start ${fmtTime(e.earliest_start_ms)} (if running jobs end as estimated)`);
      explain.show(facts.length ? h('p', {class: 'small muted'}, facts.join(' · ')) : null,
        h('ul', {class: 'reasons'}, (e.reasons || []).map((r) => h('li', {}, r))));
    }

    function renderHistory() {
      history.show(table([
        {title: 'At', cell: (t) => fmtTime(t.at_ms)},
        {title: 'To', cell: (t) => stateBadge(t.to)},
        {title: 'Why', cls: 'wrap', cell: (t) => t.reason},
      ], (job.history || []).slice().reverse(), {empty: 'No transitions.'}));
    }

    function renderAttempts() {
      const n = job.attempt || 0;
      attemptSelect.hidden = n < 2;
      if (attemptSelect.options.length === n) return;
      replace(attemptSelect, Array.from({length: n}, (_, i) => h('option', {value: i + 1}, `attempt ${i + 1}`)));
      attemptSelect.value = String(pinnedAttempt || n);
    }
    attemptSelect.addEventListener('change', () => {
      const v = Number(attemptSelect.value);
      pinnedAttempt = v === job.attempt ? null : v;
      restartLogs();
    });

    let noticeFromRefresh = false;
    async function refresh(signal) {
      const [j, ex, nodes] = await Promise.all([
        settle(api(`/jobs/${id}`, {signal})), settle(api(`/jobs/${id}/explain`, {signal})),
        settle(api('/nodes', {signal}))]);
      if (j.error) {
        if (j.error.name === 'AbortError') throw j.error;
        replace(notice, errorBox(j.error, `Job ${id}`));
        noticeFromRefresh = true;
        throw j.error;
      }
      // The controller answers again: an error the refresh put up goes (a notice of the user's
      // own action stays).
      if (noticeFromRefresh) {
        replace(notice);
        noticeFromRefresh = false;
      }
      job = j.value;
      if (nodes.value) names = new Map(nodes.value.nodes.map((n) => [n.id, n.name]));
      title.textContent = `Job ${id} · ${job.name}`;
      badge.textContent = job.state;
      badge.className = `badge state-${job.state}`;
      renderActions();
      let cost = costHidden ? 'not visible to this token' : '—';
      if (!costHidden) {
        try {
          const c = await api(`/cost?team=${encodeURIComponent(job.team)}&since_ms=${job.submitted_ms}`, {signal});
          const mine = (c.jobs || []).find((x) => x.id === job.id);
          cost = fmtMoney(mine ? mine.cost_micros : 0);
        } catch (e) {
          if (e.name === 'AbortError') throw e;
          // Another team's costs: the answer will not change, so the page stops asking.
          if (e.status === 403) costHidden = true;
          cost = e.status === 403 ? 'not visible to this token' : '—';
        }
      }
      renderSummary(cost);
      renderPlacement();
      renderExplain(ex);
      renderHistory();
      renderAttempts();
      if (job.attempt && seededAttempt !== job.attempt) await seedGpus(signal);
      if (nodes.value) sampleGpus(nodes.value.nodes);
      else chart.fail(nodes.error, 'Nodes');
      if (job.hidden) {
        logs.show(h('p', {class: 'muted'}, job.hidden));
      } else if (!following) {
        followLogs();
      } else if (pinnedAttempt === null && logAttempt !== null && job.attempt > logAttempt && logDone) {
        restartLogs();
      }
    }

    // --- Logs: one <pre> per part, fed by the long-poll route with byte offsets.
    let following = false;
    let logDone = false;
    let logAbort = null;
    function restartLogs() {
      if (logAbort) logAbort.abort();
      following = false;
      followLogs();
    }
    async function followLogs() {
      following = true;
      logDone = false;
      const mine = new AbortController();
      logAbort = mine;
      const stop = () => mine.abort();
      controller.signal.addEventListener('abort', stop, {once: true});
      const attempt = pinnedAttempt || (job && job.attempt) || 0;
      logAttempt = attempt;
      const pres = [];
      const offsets = [];
      const box = h('div', {class: 'logs', id: 'job-log'});
      // Errors go here, above the output: the output shown so far stays, and the next answer
      // clears the error and goes on where the output was.
      const errSlot = h('div', {class: 'log-error'});
      box.append(errSlot);
      logs.show(box);
      const placeholder = h('p', {class: 'muted empty'}, attempt ? 'No output yet.' : 'The job has not started: no output yet.');
      box.append(placeholder);
      while (!mine.signal.aborted) {
        const p = new URLSearchParams({wait_ms: String(LOG_WAIT_MS)});
        if (attempt) p.set('attempt', String(attempt));
        if (offsets.length) p.set('offsets', offsets.join(','));
        let r;
        try {
          r = await api(`/jobs/${id}/logs?${p}`, {signal: mine.signal});
        } catch (e) {
          if (e.name === 'AbortError' || mine.signal.aborted) return;
          replace(errSlot, errorBox(e, 'Logs'));
          if (e.status === 401 || e.status === 403 || e.status === 404) return;
          await pause(REFRESH_MS, mine.signal);
          continue;
        }
        if (mine.signal.aborted) return;
        errSlot.replaceChildren();
        const parts = r.parts || [];
        if (!attempt && !parts.length) {
          // Not started: the route answers at once; ask again once the job has an attempt.
          if (job && job.attempt) { restartLogs(); return; }
          if (job && TERMINAL.has(job.state)) {
            replace(box, h('p', {class: 'muted empty'}, `The job is ${job.state} and never started: it has no output.`));
            logDone = true;
            return;
          }
          await pause(JOB_REFRESH_MS, mine.signal);
          continue;
        }
        let any = false;
        for (const part of parts) {
          const i = part.part;
          if (!pres[i]) {
            placeholder.remove();
            pres[i] = h('pre', {class: 'log', 'data-part': i});
            const node = job && job.placement && job.placement.parts && job.placement.parts[i];
            if (parts.length > 1) {
              box.append(h('div', {class: 'log-part'}, `part ${i}${node ? ` on ${names.get(node.node) || node.node}` : ''}`));
            }
            box.append(pres[i]);
            offsets[i] = 0;
          }
          if (part.incomplete) pres[i].title = part.note || 'incomplete';
          if (!part.data) continue;
          any = true;
          const pre = pres[i];
          const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
          pre.append(part.data);
          if (pre.textContent.length > LOG_KEEP_CHARS) pre.textContent = pre.textContent.slice(-LOG_KEEP_CHARS / 2);
          // Where the next read starts: bytes of the log, which the text's length does not give
          // where the output is not UTF-8 (each bad byte arrives as a three-byte U+FFFD).
          offsets[i] = part.next_offset;
          if (follow.checked && atBottom) pre.scrollTop = pre.scrollHeight;
        }
        if (r.finished && !any) {
          logDone = true;
          box.append(h('p', {class: 'muted small log-end'}, `End of attempt ${attempt}'s output.`));
          return;
        }
      }
    }

    const page = {
      refresh, interval: JOB_REFRESH_MS,
      stop: () => controller.abort(),
    };
    return page;
  }

  // --- Nodes -----------------------------------------------------------------------------------

  function nodesPage(root) {
    const list = panel('Nodes', {id: 'nodes', cls: 'wide'});
    const notice = h('div', {id: 'nodes-notice'});
    replace(root, notice, list.el);
    let page = null;

    // Drain and undrain are admin actions: another token's 403 shows as the API words it. A drain
    // is asked to be confirmed first, as a cancel is (undrain only gives work back).
    function askDrain(name) {
      // (At the top of the page: scrolled into view and focused, as the card may be far below;
      // both buttons are disabled at the first click, so a double click drains once.)
      const yes = h('button', {type: 'button', id: 'drain-confirm', class: 'danger', onclick: () => {
        yes.disabled = true;
        keep.disabled = true;
        drain(name, true);
      }}, 'Yes, drain it');
      const keep = h('button', {type: 'button', id: 'drain-keep', onclick: () => replace(notice)}, 'Keep it');
      replace(notice, h('div', {class: 'info confirm'},
        h('span', {class: 'confirm-text'}, `Drain ${name}? It takes no new jobs; its running jobs go on. `), yes, keep));
      notice.scrollIntoView({block: 'nearest'});
      yes.focus();
    }
    async function drain(name, on) {
      try {
        await api(`/nodes/${encodeURIComponent(name)}/${on ? 'drain' : 'undrain'}`, {method: 'POST'});
        replace(notice, h('div', {class: 'info'}, on ? `${name} is draining: it takes no new jobs; its jobs go on.`
          : `${name} takes jobs again.`));
      } catch (e) {
        replace(notice, errorBox(e, on ? `Drain ${name}` : `Undrain ${name}`));
      }
      page.kick();
    }

    async function refresh(signal) {
      // The queue's placements say which job holds which GPU.
      const [r, q] = await Promise.all([settle(api('/nodes', {signal})), settle(api('/queue', {signal}))]);
      if (r.error) {
        if (r.error.name !== 'AbortError') list.fail(r.error, 'Nodes');
        throw r.error;
      }
      const owners = gpuOwners(q.value ? q.value.jobs.filter((j) => j.state !== 'pending') : []);
      const nodes = r.value.nodes || [];
      if (!nodes.length) return list.show(h('p', {class: 'muted empty'}, 'No nodes have joined yet.'));
      list.show(h('div', {class: 'node-cards'}, nodes.map((n) => {
        const labels = Object.entries(n.labels || {});
        const gpuRows = (n.telemetry || []).map((s, g) => ({g, ...s}));
        const canDrain = n.state === 'up' || n.state === 'draining';
        return h('article', {class: 'node-card', 'data-node': n.name},
          h('div', {class: 'node-head'},
            h('h3', {}, h('span', {class: `dot node-${n.state}`}), n.name),
            h('span', {class: `badge node-state node-${n.state}`},
              n.notice ? 'reclaiming' : n.storage_fault && n.state === 'up' ? 'no-room' : n.state),
            h('span', {class: 'muted small'}, `${n.gpus_used} / ${n.gpus} ${n.gpu_model} in use · ${n.market}` +
              (n.heard_since_start === false ? ' · not heard from since the controller restarted'
                : ` · heard from ${fmtAgo(n.last_heartbeat_ms)}`)),
            canDrain ? h('button', {type: 'button', class: 'small-button', 'data-action': n.state === 'up' ? 'drain' : 'undrain',
              onclick: () => (n.state === 'up' ? askDrain(n.name) : drain(n.name, false))},
              n.state === 'up' ? 'Drain' : 'Undrain') : null),
          n.notice ? h('div', {class: 'error small'},
            `Spot notice: the provider will ${n.notice.action} this node ${fmtAgo(n.notice.time_ms)} (${fmtTime(n.notice.time_ms)}).`) : null,
          n.storage_fault ? h('div', {class: 'error small'},
            `No room: ${n.storage_fault}. It takes no work until its agent can write there again.`) : null,
          h('div', {class: 'chips'}, h('span', {class: 'chip'}, n.address || 'no address'),
            labels.map(([k, v]) => h('span', {class: 'chip'}, `${k}=${v}`)),
            // Room where its agent keeps files; under a tenth free is the NodeDiskLow alert's default.
            (n.disks || []).map((d) => {
              const left = d.size_bytes > 0 ? d.free_bytes / d.size_bytes : 0;
              return h('span', {class: left < 0.1 ? 'chip chip-warn' : 'chip', 'data-disk': d.dir, title: d.path},
                `${d.dir} disk: ${fmtBytes(d.free_bytes)} free of ${fmtBytes(d.size_bytes)} (${(100 * left).toFixed(1)} %)`);
            })),
          table([
            {title: 'GPU', cell: (s) => String(s.g)},
            {title: 'Utilisation', cls: 'bar-cell', cell: (s) => meter(s.util_pct, 100, `${s.util_pct} %`, utilColor(s.util_pct))},
            {title: 'Temperature', cell: (s) => {
              const sw = h('span', {class: 'swatch'});
              sw.style.background = tempColor(s.temperature_c);
              return [sw, `${s.temperature_c} °C`];
            }},
            {title: 'Memory used', cell: (s) => fmtMib(s.mem_used_mib)},
            {title: 'Power', cell: (s) => `${s.power_w} W`},
            {title: 'Job', cell: (s) => {
              const held = owners.get(`${n.id}:${s.g}`) || [];
              return held.length ? held.flatMap((id, i) => (i ? [', ', jobLink(id)] : [jobLink(id)]))
                : h('span', {class: 'muted'}, 'idle');
            }},
          ], gpuRows, {empty: 'No telemetry yet.'}),
          (n.jobs || []).length ? h('div', {class: 'small node-jobs'}, 'Jobs: ',
            n.jobs.map((j, i) => [i ? ', ' : '', jobLink(j)])) : null);
      })));
    }
    page = {refresh, interval: REFRESH_MS};
    return page;
  }

  function meter(value, max, label, color) {
    const fill = h('span', {class: 'meter-fill'});
    fill.style.width = `${clamp((100 * value) / max, 0, 100)}%`;
    if (color) fill.style.background = color;
    return h('span', {class: 'meter'}, h('span', {class: 'meter-track'}, fill), h('span', {class: 'meter-label'}, label));
  }

  // --- Teams: spend, budgets, quotas -----------------------------------------------------------

  function teamsPage(root) {
    const budgets = panel('Budgets and spend', {id: 'budgets'});
    const quotas = panel('Quotas', {id: 'quotas'});
    const costly = panel('Costliest jobs', {id: 'costly'});
    replace(root, h('div', {class: 'columns'},
      h('div', {class: 'col-main'}, budgets.el, quotas.el), h('div', {class: 'col-side'}, costly.el)));
    async function refresh(signal) {
      const [cost, q] = await Promise.all([settle(api('/cost', {signal})), settle(api('/quotas', {signal}))]);
      if (cost.error) {
        budgets.fail(cost.error, 'Costs');
        costly.fail(cost.error, 'Costs');
      } else {
        const teams = cost.value.teams || [];
        budgets.show(
          h('p', {class: 'small'}, `All jobs: ${fmtMoney(cost.value.total_micros)}` +
            (cost.value.rented_idle_micros ? `; rented nodes no job used: ${fmtMoney(cost.value.rented_idle_micros)}` : '')),
          spendBars(teams),
          table([
            {title: 'Team', cell: (t) => t.team},
            {title: 'Spent (period)', cell: (t) => fmtMoney(t.spent_micros)},
            {title: 'Jobs cost', cell: (t) => fmtMoney(t.jobs_cost_micros)},
            {title: 'Rate', cell: (t) => `${fmtMoney(t.rate_micros_per_hour)}/h`},
            {title: 'Soft', cell: (t) => (t.budget && t.budget.soft_micros ? fmtLimit(t.budget.soft_micros) : '—')},
            {title: 'Hard', cell: (t) => (t.budget && t.budget.hard_micros ? fmtLimit(t.budget.hard_micros) : '—')},
            {title: 'Max rate', cell: (t) => (t.budget && t.budget.max_rate_micros ? `${fmtLimit(t.budget.max_rate_micros)}/h` : '—')},
            {title: 'Period', cell: (t) => (t.budget ? `${t.budget.period || 'none'} since ${fmtTime(t.budget.since_ms)}` : 'no budget')},
            {title: 'At the limit', cell: (t) => (t.budget ? (t.budget.stop_running ? 'stop running jobs' : 'stop new starts') : '—')},
          ], teams, {empty: 'No team yet that this token may see (a team\'s token sees its own team only).'}));
        const jobs = (cost.value.jobs || []).slice().sort((a, b) => b.cost_micros - a.cost_micros).slice(0, 25);
        costly.show(table([
          {title: 'Job', cell: (j) => jobLink(j.id)},
          {title: 'Name', cell: (j) => jobLink(j.id, j.name)},
          {title: 'Team', cell: (j) => j.team},
          {title: 'State', cell: (j) => stateBadge(j.state)},
          {title: 'Cost', cls: 'num', cell: (j) => fmtMoney(j.cost_micros)},
        ], jobs, {empty: 'No job has cost anything yet.'}));
      }
      if (q.error) {
        quotas.fail(q.error, 'Quotas');
      } else {
        const limit = (v) => (v ? String(v) : 'no limit');
        quotas.show(table([
          {title: 'Team', cell: (t) => t.team},
          {title: 'Guaranteed GPUs', cell: (t) => {
            const models = Object.entries(t.model_gpus || {}).map(([m, n]) => `${n} ${m}`);
            return [t.gpus ? `${t.gpus} any` : null, ...models].filter(Boolean).join(', ') || 'none';
          }},
          {title: 'Using', cell: (t) => {
            const by = Object.entries(t.used_gpus_by_model || {}).map(([m, n]) => `${n} ${m}`).join(', ');
            return `${t.used_gpus} GPU${t.used_gpus === 1 ? '' : 's'}${by ? ` (${by})` : ''}`;
          }},
          {title: 'Borrow', cell: (t) => (t.borrow ? 'yes' : 'no')},
          {title: 'Running', cell: (t) => `${t.running_jobs} / ${limit(t.max_running_jobs)}`},
          {title: 'Pending', cell: (t) => `${t.pending_jobs} / ${limit(t.max_pending_jobs)}`},
        ], q.value.teams || [], {empty: 'No team has a quota or limit.'}));
      }
      if (cost.error) throw cost.error;
    }
    return {refresh, interval: REFRESH_MS};
  }

  // --- Pool ------------------------------------------------------------------------------------

  function poolPage(root) {
    const pool = panel('Autoscaling pool', {id: 'pool', cls: 'wide'});
    replace(root, pool.el);
    async function refresh(signal) {
      let r;
      try {
        r = await api('/pool', {signal});
      } catch (e) {
        if (e.name === 'AbortError') throw e;
        if (e.status === 404) {
          pool.show(h('div', {class: 'info', id: 'no-pool'},
            h('strong', {}, 'No pool. '), `${sentence(e.message)}.`,
            h('p', {class: 'small'}, 'Without a pool the cluster is the nodes whose agents joined; ' +
              'with one, the controller rents and releases nodes from a provider as the queue needs them.')));
          return;
        }
        pool.fail(e, 'Pool');
        throw e;
      }
      pool.show(
        h('p', {}, 'Provider: ', h('strong', {}, r.provider)),
        h('h3', {}, 'Instances'),
        table([
          {title: 'Name', cell: (i) => i.name},
          {title: 'State', cell: (i) => h('span', {class: `badge pool-${i.state}`}, i.state)},
          {title: 'Offer', cell: (i) => i.offer},
          {title: 'Provider id', cell: (i) => i.provider_id || '—'},
          {title: 'Created', cell: (i) => fmtAgo(i.created_ms)},
          {title: 'For jobs', cell: (i) => ((i.for_jobs || []).length ? i.for_jobs.map((j, k) => [k ? ', ' : '', jobLink(j)]) : '—')},
          {title: 'Idle since', cell: (i) => (i.idle_since_ms ? fmtAgo(i.idle_since_ms) : '—')},
          {title: 'Note', cls: 'wrap', cell: (i) => i.note || '—'},
        ], r.instances || [], {empty: 'The pool holds no instance now.'}),
        h('h3', {}, 'Offers'),
        table([
          {title: 'Name', cell: (o) => o.name},
          {title: 'GPUs', cell: (o) => `${o.gpus} × ${o.gpu}`},
          {title: 'Market', cell: (o) => o.market},
          {title: 'Price', cls: 'num', cell: (o) => `${fmtMoney(o.price_micros_per_hour)}/h`},
          {title: 'Zone', cell: (o) => o.zone || '—'},
        ], r.offers || [], {empty: 'No offers.'}));
    }
    return {refresh, interval: REFRESH_MS};
  }

  // --- Router ----------------------------------------------------------------------------------

  const main = document.getElementById('main');
  const refreshStatus = document.getElementById('refresh-status');
  let current = null;  // {refresh, interval, stop, kick} of the page shown

  function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/';
    const [path, q] = raw.split('?');
    return {parts: path.split('/').filter(Boolean), query: new URLSearchParams(q || '')};
  }

  function route() {
    if (current) current.close();
    current = null;
    const {parts, query} = parseHash();
    const loggedIn = !!token();
    document.getElementById('nav').hidden = !loggedIn;
    document.getElementById('logout').hidden = !loggedIn;
    refreshStatus.textContent = '';
    if (parts[0] === 'login') {
      if (loggedIn) {
        // Back to the form while logged in (the browser's Back button): stay logged in.
        location.replace(query.get('next') ? `#${query.get('next')}` : '#/');
        return;
      }
      mount('login', loginPage, {query});
      return;
    }
    if (!loggedIn) {
      toLogin();
      return;
    }
    if (!parts.length) mount('overview', overviewPage, {query});
    else if (parts[0] === 'jobs' && parts[1] && /^\d+$/.test(parts[1])) mount('jobs', jobPage, {id: Number(parts[1]), query});
    else if (parts[0] === 'jobs') mount('jobs', jobsPage, {query});
    else if (parts[0] === 'nodes') mount('nodes', nodesPage, {query});
    else if (parts[0] === 'teams') mount('teams', teamsPage, {query});
    else if (parts[0] === 'pool') mount('pool', poolPage, {query});
    else replace(main, h('section', {class: 'panel'}, h('h2', {}, 'No such page'),
      h('p', {}, h('a', {href: '#/'}, 'Go to the overview'))));
  }

  // Mounts a page and runs its refresh now and then every `interval` ms, one at a time, until
  // another page replaces it.
  function mount(name, make, params) {
    for (const a of document.querySelectorAll('#nav a')) {
      a.classList.toggle('active', a.dataset.page === name);
    }
    main.replaceChildren();
    main.dataset.page = name;
    const page = make(main, params) || {};
    let timer = null;
    let closed = false;
    let running = null;
    const abort = new AbortController();
    const tick = async () => {
      clearTimeout(timer);
      if (closed || !page.refresh) return;
      if (running) return;
      running = (async () => {
        try {
          await page.refresh(abort.signal);
          if (!closed) refreshStatus.textContent = `Updated ${new Date().toLocaleTimeString()}`;
        } catch (e) {
          if (!closed && e.name !== 'AbortError') refreshStatus.textContent = 'Refresh failed';
        }
      })();
      await running;
      running = null;
      if (!closed) timer = setTimeout(tick, page.interval || REFRESH_MS);
    };
    page.kick = () => { if (running) running.then(() => tick()); else tick(); };
    page.close = () => {
      closed = true;
      clearTimeout(timer);
      abort.abort();
      if (page.stop) page.stop();
    };
    current = page;
    tick();
  }

  document.getElementById('logout').addEventListener('click', () => {
    toLogin('Logged out: the token is gone from this tab.', 'info');
  });
  window.addEventListener('hashchange', route);
  route();
})();
