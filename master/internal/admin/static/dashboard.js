// redcrawl admin dashboard: redraws the server-rendered page from the JSON
// API. Data only ever reaches the page through textContent and attributes.
'use strict';

(() => {
  const REFRESH_MS = 2000;
  const SLOW_EVERY = 5; // lost tasks and proxies every 5th refresh
  const SPAN = '1h';
  const STEP = '10s';
  const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2'];
  const SVGNS = 'http://www.w3.org/2000/svg';

  const $ = (id) => document.getElementById(id);
  const body = document.body;
  const canAct = body.dataset.canAct === 'true';
  const publicRead = body.dataset.publicRead === 'true';

  // Formatters: twins of those in dashboard.go.
  const intFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
  const num = (n) => intFmt.format(n || 0);
  const rate = (x) => (x || 0).toFixed(1);
  const domid = (s) => s.replace(/[^A-Za-z0-9_-]/gu, '_');
  function when(t) {
    if (!t) return '';
    const d = new Date(t);
    if (isNaN(d) || d.getUTCFullYear() <= 1) return '';
    return d.toISOString().slice(0, 19).replace('T', ' ') + 'Z';
  }
  const whenMS = (ms) => (ms ? when(ms) : '');
  function age(now, t) {
    const d = Date.parse(t);
    if (isNaN(d) || new Date(d).getUTCFullYear() <= 1) return '';
    return Math.max(0, Math.round((Date.parse(now) - d) / 1000)) + ' s';
  }
  const mib = (b) => ((b || 0) / 1048576).toFixed(1);
  // retrying: only tasks waiting for their retry backoff are left
  const crawlState = (c) => (c.paused ? 'paused' : c.finished ? 'finished'
    : (c.retry > 0 && !c.queued && !c.in_flight) ? 'retrying' : 'running');
  const slaveState = (s) => (!s.alive ? 'dead' : s.draining || s.state === 'draining' ? 'draining' : 'running');

  function el(tag, props, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'className') e.className = v;
      else if (k.startsWith('data-')) e.setAttribute(k, v);
      else if (v === true) e.setAttribute(k, '');
      else e.setAttribute(k, String(v));
    }
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function show(node, visible) {
    node.hidden = !visible;
  }

  // cell sets the text (and id, class, data-value) of tr's i-th cell,
  // touching the DOM only where something changed.
  function cell(tr, i, text, opt = {}) {
    while (tr.cells.length <= i) tr.insertCell();
    const td = tr.cells[i];
    if (opt.id !== undefined && td.id !== opt.id) td.id = opt.id;
    const cls = opt.cls || '';
    if (td.className !== cls) td.className = cls;
    if (opt.value !== undefined && td.dataset.value !== String(opt.value)) td.dataset.value = String(opt.value);
    if (opt.title !== undefined && td.title !== opt.title) td.title = opt.title;
    if (td.childElementCount > 0 || td.textContent !== text) td.textContent = text;
    return td;
  }

  // richCell rebuilds tr's i-th cell from build() when its signature changes.
  function richCell(tr, i, sig, build, opt = {}) {
    while (tr.cells.length <= i) tr.insertCell();
    const td = tr.cells[i];
    if (opt.id !== undefined && td.id !== opt.id) td.id = opt.id;
    if (opt.cls !== undefined && td.className !== opt.cls) td.className = opt.cls;
    if (td.dataset.sig !== sig) {
      td.replaceChildren(...build());
      td.dataset.sig = sig;
    }
    return td;
  }

  // syncRows makes tbody hold one row per item, in order, reusing rows by
  // key so that buttons keep their focus.
  function syncRows(tbody, items, key, render) {
    const old = new Map();
    for (const tr of Array.from(tbody.rows)) old.set(tr.dataset.key, tr);
    items.forEach((it, i) => {
      const k = key(it);
      let tr = old.get(k);
      if (tr) old.delete(k);
      else {
        tr = document.createElement('tr');
        tr.dataset.key = k;
      }
      render(tr, it);
      if (tbody.rows[i] !== tr) tbody.insertBefore(tr, tbody.rows[i] || null);
    });
    for (const tr of old.values()) tr.remove();
  }

  function actButton(label, kind, data, opt = {}) {
    const props = { type: 'button', id: opt.id, 'data-kind': kind, hidden: !!opt.hidden, disabled: !canAct || !!opt.disabled };
    for (const [k, v] of Object.entries(data)) props['data-' + k] = v;
    if (opt.confirm) props['data-confirm'] = opt.confirm;
    return el('button', props, label);
  }

  // --- API ---------------------------------------------------------------

  class APIError extends Error {
    constructor(status, msg) {
      super(msg);
      this.status = status;
    }
  }

  async function api(path, init = {}) {
    const r = await fetch(path, { credentials: 'same-origin', headers: { Accept: 'application/json' }, ...init });
    let data = null;
    try {
      data = await r.json();
    } catch (e) {
      data = null;
    }
    if (!r.ok) {
      if (r.status === 401 && !publicRead && !init.method) {
        window.location.assign('/login');
      }
      throw new APIError(r.status, (data && data.error) || r.status + ' ' + r.statusText);
    }
    return data;
  }

  // --- overview ----------------------------------------------------------

  let crawlNames = [];
  let rulesVersion = '';

  function renderHeader(ov) {
    const own = ov.crawls.filter((c) => !c.other);
    const tags = own.map((c) => {
      const span = el('span', { className: 'crawl-tag' }, c.crawl);
      if (c.paused) span.append(' ', el('span', { className: 'badge badge-paused' }, 'paused'));
      if (c.finished) span.append(' ', el('span', { className: 'badge badge-finished' }, 'finished'));
      return span;
    });
    $('hdr-crawls').replaceChildren(...tags);
    document.title = ['redcrawl admin', ...own.map((c) => c.crawl)].join(' · ');
    const r = ov.rules || {};
    rulesVersion = r.version || '';
    $('rules-version').textContent = r.version || 'none';
    $('rules-sets').textContent = String(r.rule_sets || 0);
    $('rules-loaded').textContent = when(r.loaded_at) || 'never';
    show($('rules-error'), !!r.last_error);
    $('rules-error-text').textContent = r.last_error || '';
    const at = when(r.last_error_at);
    $('rules-error-at').textContent = at ? ' (' + at + ')' : '';
  }

  function renderCrawl(tr, c) {
    const id = 'crawl-' + domid(c.crawl);
    const st = crawlState(c);
    if (tr.id !== id) tr.id = id;
    cell(tr, 0, c.crawl, { cls: 'name' });
    cell(tr, 1, st, { id: id + '-state', cls: 'state state-' + st });
    const counters = [['queued', c.queued], ['inflight', c.in_flight], ['retry', c.retry], ['done', c.done], ['failed', c.failed]];
    counters.forEach(([name, v], i) => cell(tr, 2 + i, num(v), { id: id + '-' + name, cls: 'num', value: v || 0 }));
    cell(tr, 7, c.finished ? ('yes ' + whenMS(c.finished_at)).trim() : 'no', { id: id + '-finished' });
    cell(tr, 8, rate(c.pages_per_sec), { id: id + '-rate', cls: 'num', value: c.pages_per_sec || 0 });
    cell(tr, 9, num(c.seen), { id: id + '-seen', cls: 'num', value: c.seen || 0 });
    cell(tr, 10, num(c.lost), { id: id + '-lost', cls: 'num', value: c.lost || 0 });
    const scheds = c.schedules || [];
    const rc = c.recrawl;
    richCell(tr, 11, JSON.stringify([scheds, rc || null]), () => {
      const out = scheds.length === 0 ? [document.createTextNode('–')] : scheds.map((s) => {
        const d = el('div');
        d.append((s.name || 'crawl') + ': ', el('span', { className: 'mono' }, s.spec),
          ' · next ' + (when(s.next_run) || '–') + ' · last ' + (when(s.last_run) || 'never'));
        return d;
      });
      if (rc) {
        // the last recrawl run's pages, as master status counts them
        const d = el('div', { id: id + '-recrawl', className: 'recrawl' });
        d.append('recrawl ' + rc.run + ': ' + num(rc.unchanged) + ' unchanged · ' + num(rc.changed) +
          ' changed · ' + num(rc.new) + ' new');
        out.push(d);
      }
      return out;
    }, { id: id + '-schedules', cls: 'schedules' });
    const n = domid(c.crawl);
    richCell(tr, 12, [st, c.paused, (c.failed || 0) > 0, !!c.other].join('|'), () => c.other ? [
      el('span', { className: 'muted' }, "not this master's"),
    ] : [
      // a finished crawl has nothing left to pause
      actButton('Pause', 'pause', { crawl: c.crawl }, { id: 'btn-pause-' + n, hidden: c.paused || c.finished }),
      actButton('Resume', 'resume', { crawl: c.crawl }, { id: 'btn-resume-' + n, hidden: !c.paused }),
      actButton('Requeue failed', 'requeue', { crawl: c.crawl }, {
        id: 'btn-requeue-' + n, disabled: !(c.failed > 0),
        confirm: 'Put the failed tasks of ' + c.crawl + ' back in the queues?',
      }),
    ], { cls: 'actions' });
  }

  function renderSlave(now, tr, s) {
    const st = slaveState(s);
    cell(tr, 0, s.slave, { cls: 'mono' });
    cell(tr, 1, s.crawl);
    cell(tr, 2, s.host);
    cell(tr, 3, st, { cls: 'state state-' + st });
    cell(tr, 4, age(now, s.last_seen), { cls: 'num' });
    cell(tr, 5, num(s.pages), { cls: 'num' });
    cell(tr, 6, num(s.errors), { cls: 'num' });
    cell(tr, 7, num(s.in_flight), { cls: 'num' });
    cell(tr, 8, mib(s.rss), { cls: 'num' });
    cell(tr, 9, s.render ? 'yes' : 'no');
    const rv = s.rules_version || '';
    cell(tr, 10, rv, { cls: rv && rulesVersion && rv !== rulesVersion ? 'mono warn' : 'mono' });
    richCell(tr, 11, [s.alive, st].join('|'), () => (s.alive ? [
      actButton('Drain', 'drain', { slave: s.slave }, {
        id: 'btn-drain-' + domid(s.slave), disabled: st === 'draining',
        confirm: 'Drain slave ' + s.slave + '? It finishes its work and leaves.',
      }),
    ] : []), { cls: 'actions' });
  }

  // syncOptions keeps a select's crawl options, preserving its choice.
  function syncOptions(sel, names, first) {
    const want = (first ? [first] : []).concat(names.map((n) => [n, n]));
    const have = Array.from(sel.options).map((o) => [o.value, o.textContent]);
    if (JSON.stringify(want) === JSON.stringify(have)) return;
    const cur = sel.value;
    sel.replaceChildren(...want.map(([v, t]) => el('option', { value: v }, t)));
    if (want.some(([v]) => v === cur)) sel.value = cur;
  }

  function renderOverview(ov) {
    ov.crawls = ov.crawls || [];
    ov.slaves = ov.slaves || [];
    renderHeader(ov);
    syncRows($('crawls').tBodies[0], ov.crawls, (c) => c.crawl, renderCrawl);
    show($('crawls-empty'), ov.crawls.length === 0);
    syncRows($('slaves').tBodies[0], ov.slaves, (s) => s.crawl + ' ' + s.slave, (tr, s) => renderSlave(ov.now, tr, s));
    show($('slaves-empty'), ov.slaves.length === 0);
    // the crawls this master runs: the others (listed, read only) have no series, proxies or actions here
    crawlNames = ov.crawls.filter((c) => !c.other).map((c) => c.crawl);
    syncOptions($('seed-crawl'), crawlNames);
    syncOptions($('f-crawl'), crawlNames, ['', 'all']);
  }

  // --- chart -------------------------------------------------------------

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function niceMax(v) {
    if (v <= 1) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  function drawChart(now, names, series) {
    const W = 1200, H = 240, L = 48, R = 12, T = 10, B = 24;
    const t1 = Date.parse(now) || Date.now();
    const t0 = t1 - 3600 * 1000;
    let peak = 0;
    series.forEach((pts) => pts.forEach((p) => { peak = Math.max(peak, p.pages_per_sec || 0); }));
    const ymax = niceMax(peak);
    const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
    const y = (v) => T + (1 - v / ymax) * (H - T - B);
    const nodes = [];
    for (const f of [0, 0.5, 1]) {
      const v = ymax * f;
      nodes.push(svg('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
      nodes.push(svg('text', { x: L - 4, y: y(v) + 4, 'text-anchor': 'end', class: 'axis' }, v % 1 ? v.toFixed(1) : String(v)));
    }
    for (const m of [60, 45, 30, 15, 0]) {
      nodes.push(svg('text', { x: x(t1 - m * 60000), y: H - 6, 'text-anchor': m === 0 ? 'end' : 'middle', class: 'axis' },
        m === 0 ? 'now' : '−' + m + ' min'));
    }
    const legend = [];
    const summary = [];
    series.forEach((pts, i) => {
      const color = COLORS[i % COLORS.length];
      const coords = pts.map((p) => x(Date.parse(p.at)).toFixed(1) + ',' + y(p.pages_per_sec || 0).toFixed(1)).join(' ');
      if (pts.length > 0) {
        const line = svg('polyline', { points: coords, fill: 'none', stroke: color, 'stroke-width': 1.5, class: 'series' });
        line.append(svg('title', {}, names[i]));
        nodes.push(line);
      }
      const last = pts.length ? pts[pts.length - 1].pages_per_sec || 0 : 0;
      const top = pts.reduce((m, p) => Math.max(m, p.pages_per_sec || 0), 0);
      const item = el('span', { className: 'legend-item' });
      const swatch = el('span', { className: 'swatch' });
      swatch.style.background = color;
      item.append(swatch, names[i] + ': ' + rate(last) + ' now, peak ' + rate(top));
      legend.push(item);
      summary.push(names[i] + ' ' + rate(last));
    });
    if (series.every((pts) => pts.length === 0)) {
      nodes.push(svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'axis' }, 'no pages yet'));
    }
    $('chart').replaceChildren(...nodes);
    $('chart-legend').replaceChildren(...legend);
    $('chart-summary').textContent = summary.length ? '(' + summary.join(', ') + ' pages/s)' : '';
  }

  async function refreshSeries(now) {
    const names = crawlNames.slice();
    const series = await Promise.all(names.map((c) =>
      api('/api/v1/series?' + new URLSearchParams({ crawl: c, span: SPAN, step: STEP }))));
    drawChart(now, names, series.map((s) => s || []));
  }

  // --- exceptions, lost tasks, proxies -----------------------------------

  const exc = { offset: 0, limit: 50, filter: {}, seq: 0 };

  function readFilter() {
    const f = {};
    for (const [k, id] of [['crawl', 'f-crawl'], ['kind', 'f-kind'], ['host', 'f-host'], ['slave', 'f-slave'], ['since', 'f-since'], ['until', 'f-until']]) {
      const v = $(id).value.trim();
      if (v) f[k] = v;
    }
    return f;
  }

  async function loadExceptions() {
    const seq = ++exc.seq;
    const q = new URLSearchParams({ ...exc.filter, limit: exc.limit, offset: exc.offset });
    let page;
    try {
      page = await api('/api/v1/exceptions?' + q);
    } catch (e) {
      if (seq !== exc.seq) return;
      $('exc-error').textContent = e.message;
      show($('exc-error'), true);
      return;
    }
    if (seq !== exc.seq) return; // a newer filter won
    show($('exc-error'), false);
    const items = page.items || [];
    const rows = items.map((x) => {
      const tr = el('tr');
      tr.append(
        el('td', { className: 'mono nowrap' }, whenMS(x.at)),
        el('td', {}, x.crawl),
        el('td', { className: 'kind kind-' + domid(x.kind) }, x.kind),
        el('td', {}, x.host),
        el('td', { className: 'mono' }, x.slave),
        el('td', { className: 'num' }, x.status ? String(x.status) : ''),
        el('td', { className: 'url', title: x.url }, x.url),
        el('td', { className: 'msg', title: x.message }, x.message),
      );
      return tr;
    });
    $('exceptions').tBodies[0].replaceChildren(...rows);
    show($('exc-empty'), rows.length === 0);
    const total = page.total || 0;
    $('exc-total').textContent = String(total);
    $('exc-range').textContent = rows.length ? (exc.offset + 1) + '–' + (exc.offset + rows.length) : '0';
    $('exc-prev').disabled = exc.offset === 0;
    $('exc-next').disabled = exc.offset + rows.length >= total;
  }

  async function loadLost() {
    const lost = (await api('/api/v1/lost?limit=50')) || [];
    const rows = lost.map((l) => {
      const tr = el('tr');
      tr.append(
        el('td', { className: 'mono nowrap' }, whenMS(l.detected_at)),
        el('td', {}, l.crawl),
        el('td', { className: 'url', title: l.url }, l.url),
        el('td', { className: 'mono' }, l.slave),
        el('td', { className: 'num' }, String(l.attempt || 0)),
        el('td', {}, l.reason),
        el('td', { className: 'mono nowrap' }, whenMS(l.leased_at)),
      );
      return tr;
    });
    $('lost').tBodies[0].replaceChildren(...rows);
    show($('lost-empty'), rows.length === 0);
    $('lost-note').textContent = rows.length === 50 ? '(latest 50)' : '';
  }

  async function loadProxies() {
    const names = crawlNames.slice();
    const lists = await Promise.all(names.map((c) => api('/api/v1/proxies?' + new URLSearchParams({ crawl: c }))));
    const items = [];
    lists.forEach((ps, i) => (ps || []).forEach((p) => items.push({ ...p, crawl: names[i] })));
    syncRows($('proxies').tBodies[0], items, (p) => p.crawl + ' ' + p.proxy, (tr, p) => {
      cell(tr, 0, p.crawl);
      cell(tr, 1, p.proxy, { cls: 'mono' });
      cell(tr, 2, p.state, { cls: 'state state-' + domid(p.state || '') });
      cell(tr, 3, p.slave, { cls: 'mono' });
      cell(tr, 4, num(p.bans), { cls: 'num' });
      cell(tr, 5, p.reason || '');
      cell(tr, 6, when(p.at), { cls: 'mono nowrap' });
      // a direct connection is not a proxy: there is nothing to retire
      const retired = p.state === 'retired' || p.state === 'removed' || p.proxy === 'direct';
      richCell(tr, 7, String(retired), () => (retired ? [] : [
        actButton('Retire', 'retire_proxy', { crawl: p.crawl, proxy: p.proxy }, {
          confirm: 'Retire proxy ' + p.proxy + ' for good?',
        }),
      ]), { cls: 'actions' });
    });
    show($('proxies-empty'), items.length === 0);
  }

  // --- actions -----------------------------------------------------------

  function say(msg, isError) {
    const m = $('action-msg');
    m.textContent = msg;
    m.className = 'banner ' + (isError ? 'error' : 'ok');
    show(m, true);
  }

  async function act(a) {
    try {
      const res = await api('/api/v1/actions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify(a),
      });
      say(res.message || a.kind + ': done' + (res.count ? ' (' + res.count + ')' : ''), !res.ok);
      return true;
    } catch (e) {
      say(a.kind + ' failed: ' + e.message + (e.status === 401 ? ' — log in to act' : ''), true);
      return false;
    } finally {
      refresh(false);
    }
  }

  document.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-kind]');
    if (!b || b.disabled) return;
    const d = b.dataset;
    if (d.confirm && !window.confirm(d.confirm)) return;
    const a = { kind: d.kind };
    if (d.crawl) a.crawl = d.crawl;
    if (d.slave) a.slave = d.slave;
    if (d.proxy) a.proxy = d.proxy;
    act(a);
  });

  $('seed-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const urls = $('seed-urls').value.split(/\s+/).filter(Boolean);
    if (urls.length === 0) {
      say('seed: enter at least one URL', true);
      return;
    }
    if (await act({ kind: 'seed', crawl: $('seed-crawl').value, urls })) $('seed-urls').value = '';
  });

  $('exc-filter').addEventListener('submit', (ev) => {
    ev.preventDefault();
    exc.filter = readFilter();
    exc.offset = 0;
    loadExceptions();
  });
  $('exc-filter').addEventListener('reset', () => {
    setTimeout(() => {
      exc.filter = {};
      exc.offset = 0;
      loadExceptions();
    }, 0);
  });
  $('f-crawl').addEventListener('change', () => $('f-apply').click());
  $('exc-prev').addEventListener('click', () => {
    exc.offset = Math.max(0, exc.offset - exc.limit);
    loadExceptions();
  });
  $('exc-next').addEventListener('click', () => {
    exc.offset += exc.limit;
    loadExceptions();
  });

  // --- refresh loop ------------------------------------------------------

  let ticks = 0;
  let timer = 0;

  async function refresh(schedule) {
    const slow = ticks++ % SLOW_EVERY === 0;
    try {
      const ov = await api('/api/v1/overview');
      renderOverview(ov);
      await refreshSeries(ov.now);
      if (slow) {
        await Promise.all([loadLost(), loadProxies(), exc.offset === 0 ? loadExceptions() : null]);
      }
      const now = new Date();
      body.dataset.updated = now.toISOString();
      $('updated').textContent = now.toLocaleTimeString();
      $('conn').textContent = 'live';
      $('conn').className = 'conn live';
      show($('load-error'), false);
    } catch (e) {
      $('conn').textContent = 'offline';
      $('conn').className = 'conn offline';
      $('load-error').textContent = 'Refresh failed: ' + e.message + ' — retrying.';
      show($('load-error'), true);
    }
    if (schedule) {
      clearTimeout(timer);
      timer = setTimeout(() => refresh(true), REFRESH_MS);
    }
  }

  refresh(true);
})();
