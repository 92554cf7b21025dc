// The dashboard in headless Chromium, as a person would use it: log in, look, open a job, cancel
// it. tests/web_ui_test.sh starts the cluster and runs this with:
//   UI_URL      the controller, http://127.0.0.1:PORT
//   UI_TOKEN    an admin token
//   UI_VIEWER_TOKEN  a token of role viewer
//   UI_JOB      a running job whose output has UI_MARKER in it
//   UI_OTHER_JOB  another running job, which the viewer tries to cancel
//   CHROMIUM    the browser (default /usr/bin/chromium)
//   GPUFLEET_SCREENSHOTS  a folder: write dashboard-*.png there at 1366x768 (optional)
//
// Every wait is on a condition in the page, never on time. Any JavaScript error, and any console
// error but the HTTP errors a step expects, fails the test.
'use strict';

const path = require('path');
const puppeteer = require('puppeteer-core');

const URL = need('UI_URL');
const TOKEN = need('UI_TOKEN');
const VIEWER_TOKEN = need('UI_VIEWER_TOKEN');
const JOB = need('UI_JOB');
const OTHER_JOB = need('UI_OTHER_JOB');
const MARKER = need('UI_MARKER');
const SHOTS = process.env.GPUFLEET_SCREENSHOTS || '';
const WAIT_MS = 30000;

function need(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`FAIL: ${name} is not set (tests/web_ui_test.sh sets it)`);
    process.exit(2);
  }
  return v;
}

const problems = [];
// HTTP errors a step expects, as [path prefix, status]: Chromium logs each as a console error.
let expected = [];
// The API answers 404 for a controller without a pool; /v1/alerts may not exist on a controller.
const ALWAYS_EXPECTED = [['/v1/pool', 404], ['/v1/alerts', 404]];

// While a step makes the API unreachable on purpose, the failed loads it causes.
let expectUnreachable = false;

function isExpected(url, text) {
  if (expectUnreachable && text.includes('net::ERR_FAILED')) return true;
  let p;
  try {
    p = new globalThis.URL(url).pathname;
  } catch (e) {
    return false;
  }
  return ALWAYS_EXPECTED.concat(expected).some(([prefix, status]) =>
    p.startsWith(prefix) && text.includes(`status of ${status}`));
}

let step = 'start';
async function stepDo(name, fn) {
  step = name;
  const t0 = Date.now();
  try {
    await fn();
  } catch (e) {
    throw new Error(`${name}: ${e.message}`);
  }
  console.log(`ok - ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    // CI runs as root, where Chromium's sandbox cannot start.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--lang=en-US'],
    defaultViewport: {width: 1366, height: 768},
  });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(WAIT_MS);
    page.on('pageerror', (err) => problems.push(`[${step}] page error: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() !== 'error' && msg.type() !== 'warn' && msg.type() !== 'warning') return;
      const url = (msg.location() && msg.location().url) || '';
      if (msg.type() === 'error' && isExpected(url, msg.text())) return;
      problems.push(`[${step}] console ${msg.type()}: ${msg.text()} ${url}`);
    });
    const shot = async (name) => {
      if (!SHOTS) return;
      // Let pending layout and fonts settle so the picture shows what a person would see.
      await page.evaluate(() => document.fonts.ready);
      await page.screenshot({path: path.join(SHOTS, `dashboard-${name}.png`)});
      console.log(`wrote ${path.join(SHOTS, `dashboard-${name}.png`)}`);
    };
    const text = (sel) => page.$eval(sel, (el) => el.textContent);
    const waitText = (sel, want) => page.waitForFunction((s, w) => {
      const el = document.querySelector(s);
      return el && el.textContent.includes(w);
    }, {}, sel, want);

    await stepDo('the page asks for a token first', async () => {
      await page.goto(`${URL}/`, {waitUntil: 'domcontentloaded'});
      await page.waitForSelector('#login-token');
      await page.waitForFunction(() => location.hash.startsWith('#/login'));
    });

    await stepDo('a bad token is refused with the API\'s reason', async () => {
      expected = [['/v1/queue', 401]];
      await page.type('#login-token', 'gf_user_00000000000000000000000000000000');
      await page.click('#login-submit');
      await page.waitForSelector('#login-status .error');
      const t = await text('#login-status');
      if (!/token/i.test(t)) throw new Error(`the error says '${t}'`);
      expected = [];
    });

    await stepDo('the admin token logs in to the overview', async () => {
      await page.$eval('#login-token', (el) => { el.value = ''; });
      await page.type('#login-token', TOKEN);
      await page.click('#login-submit');
      await page.waitForFunction(() => location.hash === '#/');
      const stored = await page.evaluate(() => sessionStorage.getItem('gpufleet.token'));
      if (stored !== TOKEN) throw new Error('the token is not in sessionStorage');
    });

    await stepDo('the overview shows the heat-map and the running job', async () => {
      // 6 GPUs on 2 nodes, with telemetry (a value, not "–").
      await page.waitForFunction(() =>
        document.querySelectorAll('#heatmap-util .heat-cell[data-gpu]:not(.heat-stale)').length === 6 &&
        document.querySelectorAll('#heatmap-temp .heat-cell[data-gpu]:not(.heat-stale)').length === 6);
      await page.waitForSelector(`#running-jobs tr[data-job="${JOB}"]`);
      // The job's GPU is marked with its id in the heat-map, and follows the telemetry the agent
      // replays: idle at first, then busy.
      await page.waitForFunction((j) => [...document.querySelectorAll('#heatmap-util .heat-cell')]
        .some((c) => c.querySelector('.heat-job') && c.querySelector('.heat-job').textContent === `#${j}` &&
          parseInt(c.querySelector('.heat-value').textContent, 10) >= 50), {}, JOB);
      await page.waitForSelector('#queue tr[data-job]');
      await page.waitForSelector('#spend .spend[data-team="vision"] .bar-fill');
      await page.waitForFunction(() => document.querySelector('#stat-running .stat-value').textContent === '2');
      await page.waitForFunction(() => document.querySelector('#alerts .panel-body').children.length > 0);
      await shot('overview');
    });

    await stepDo('the nodes page shows both nodes with their GPUs', async () => {
      await page.click('#nav a[data-page="nodes"]');
      await page.waitForFunction(() => document.querySelectorAll('.node-card').length === 2);
      await page.waitForFunction(() => document.querySelectorAll('.node-card[data-node="gpu-a"] tbody tr').length === 4);
      await page.waitForFunction((j) => [...document.querySelectorAll('.node-card[data-node="gpu-a"] tbody a')]
        .some((a) => a.textContent === `#${j}`), {}, JOB);
      await waitText('.node-card[data-node="gpu-b"]', 'spot');
      // The room its agent reported on its data directory.
      await page.waitForFunction(() => {
        const chip = document.querySelector('.node-card[data-node="gpu-a"] .chip[data-disk="data"]');
        return chip && /^data disk: \S+ \S+ free of \S+ \S+ \(\d+\.\d %\)$/.test(chip.textContent);
      });
      await shot('nodes');
    });

    await stepDo('Drain and Undrain on the nodes page change the node\'s state', async () => {
      await page.click('.node-card[data-node="gpu-b"] button[data-action="drain"]');
      // A drain is confirmed first: "Keep it" sends nothing (the audit log, which records every
      // drain asked for, has none), and "Yes, drain it" drains.
      await page.waitForSelector('#drain-confirm');
      await page.click('#drain-keep');
      await page.waitForFunction(() => !document.querySelector('#drain-confirm'));
      const audit = await (await fetch(`${URL}/v1/audit?verb=node.drain`,
        {headers: {Authorization: `Bearer ${TOKEN}`}})).json();
      if ((audit.records || []).some((r) => r.object === 'node gpu-b')) {
        throw new Error(`gpu-b was drained before the drain was confirmed: ${JSON.stringify(audit.records)}`);
      }
      await page.click('.node-card[data-node="gpu-b"] button[data-action="drain"]');
      await page.waitForSelector('#drain-confirm');
      await page.click('#drain-confirm');
      await waitText('.node-card[data-node="gpu-b"] .node-state', 'draining');
      // The overview counts the drained node's 2 GPUs apart: they take no pending job.
      await page.click('#nav a[data-page="overview"]');
      await waitText('#stat-gpus .stat-label', 'GPUs in use (2 on nodes not taking work)');
      await page.click('#nav a[data-page="nodes"]');
      await page.waitForSelector('.node-card[data-node="gpu-b"] button[data-action="undrain"]');
      await page.click('.node-card[data-node="gpu-b"] button[data-action="undrain"]');
      await waitText('.node-card[data-node="gpu-b"] .node-state', 'up');
    });

    await stepDo('the jobs page filters by name and state', async () => {
      await page.click('#nav a[data-page="jobs"]');
      await page.waitForSelector(`#jobs tr[data-job="${JOB}"]`);
      await page.type('#filter-name', 'llm');
      await page.waitForFunction((j) => !document.querySelector(`#jobs tr[data-job="${j}"]`) &&
        document.querySelectorAll('#jobs tr[data-job]').length === 2, {}, JOB);
      await page.$eval('#filter-name', (el) => { el.value = ''; el.dispatchEvent(new Event('input')); });
      await page.select('#filter-state', 'pending');
      await page.waitForFunction(() => location.hash.includes('state=pending') &&
        document.querySelectorAll('#jobs tr[data-job]').length === 1);
      await page.select('#filter-state', '');
      await page.waitForSelector(`#jobs tr[data-job="${JOB}"]`);
    });

    await stepDo('the job page shows state, placement, the log line and a GPU chart', async () => {
      await page.click(`#jobs tr[data-job="${JOB}"] a`);
      await page.waitForFunction((j) => location.hash === `#/jobs/${j}`, {}, JOB);
      await waitText('#job-state', 'running');
      await waitText('#job-placement', 'gpu-a');
      await waitText('#job-log', MARKER);
      // The job prints a line a second: the page follows its output as it comes.
      const lines = await page.$eval('#job-log pre', (el) => el.textContent.split('\n').length);
      await page.waitForFunction((n) => document.querySelector('#job-log pre').textContent.split('\n').length > n + 2,
        {}, lines);
      // The bytes that are not UTF-8 show as U+FFFD, and every later read starts where the API
      // said (next_offset): no line loses its first bytes.
      const shown = await page.$eval('#job-log pre', (el) => el.textContent);
      if (!shown.includes('not UTF-8: \uFFFD\uFFFD')) throw new Error(`no U+FFFD in the log: ${shown.slice(0, 300)}`);
      const cut = shown.split('\n').filter((l) => l.includes('web-ui-test: step') && !l.startsWith('gpufleet-web-ui-test: step'));
      if (cut.length) throw new Error(`log lines lost their first bytes: ${JSON.stringify(cut.slice(0, 3))}`);
      await page.waitForSelector('#job-explain li');
      await page.waitForSelector('#job-history tbody tr');
      // Two samples or more: a line, not a dot.
      await page.waitForFunction(() => [...document.querySelectorAll('#job-gpus path.chart-line')]
        .some((p) => p.getAttribute('d').includes('L')));
      await waitText('#job-title', 'resnet-demo');
      if (SHOTS) {
        // For the picture only: enough samples (3 s apart) to draw a curve.
        await page.waitForFunction(() => [...document.querySelectorAll('#job-gpus path.chart-line')]
          .some((p) => p.getAttribute('d').split('L').length >= 8), {timeout: 60000});
      }
      await shot('job');
    });

    await stepDo('the job page rides out a controller that does not answer for a while', async () => {
      // Every API request fails (as while the controller restarts), then answers again: the
      // output shown stays, the errors go, and the log goes on where it was.
      let blocking = true;
      expectUnreachable = true;
      const onRequest = (r) => (blocking && r.url().includes('/v1/') ? r.abort() : r.continue());
      await page.setRequestInterception(true);
      page.on('request', onRequest);
      try {
        await page.waitForSelector('#job-log .log-error .error');
        await page.waitForSelector('#job-notice .error');
        await waitText('#job-log pre', MARKER);
        const before = await page.$eval('#job-log pre', (el) => el.textContent.length);
        blocking = false;
        await page.waitForFunction(() => !document.querySelector('#job-log .log-error .error') &&
          !document.querySelector('#job-notice .error'));
        await page.waitForFunction((n) => document.querySelector('#job-log pre').textContent.length > n, {}, before);
      } finally {
        page.off('request', onRequest);
        await page.setRequestInterception(false);
        expectUnreachable = false;
      }
    });

    await stepDo('Cancel on the job page cancels the job', async () => {
      await page.click('#cancel-job');
      await page.waitForSelector('#cancel-confirm');
      await page.click('#cancel-confirm');
      await waitText('#job-state', 'cancelled');
      await page.waitForFunction(() => !document.querySelector('#cancel-job'));
      await waitText('#job-history', 'cancelled');
      await page.waitForSelector('#job-log .log-end');
    });

    await stepDo('the teams page shows budgets and quotas', async () => {
      await page.click('#nav a[data-page="teams"]');
      await page.waitForSelector('#budgets .spend[data-team="nlp"] .over-soft');
      await waitText('#quotas', 'nlp');
      await waitText('#costly', 'resnet-demo');
    });

    await stepDo('the pool page says this controller has none', async () => {
      await page.click('#nav a[data-page="pool"]');
      await waitText('#no-pool', 'no pool');
    });

    await stepDo('log out forgets the token', async () => {
      await page.click('#logout');
      await page.waitForSelector('#login-token');
      await waitText('#login-status', 'Logged out');
      const stored = await page.evaluate(() => sessionStorage.getItem('gpufleet.token'));
      if (stored !== null) throw new Error('the token is still in sessionStorage');
      await page.goto(`${URL}/#/nodes`, {waitUntil: 'domcontentloaded'});
      await page.waitForSelector('#login-token');
    });

    await stepDo('a viewer\'s Cancel is refused with the API\'s reason', async () => {
      // A viewer without a team may not read team nlp's costs or cancel its job.
      expected = [[`/v1/jobs/${OTHER_JOB}/cancel`, 403], ['/v1/cost', 403]];
      await page.type('#login-token', VIEWER_TOKEN);
      await page.click('#login-submit');
      // Logging in returns to the page that asked for it.
      await page.waitForSelector('.node-card');
      await page.goto(`${URL}/#/jobs/${OTHER_JOB}`, {waitUntil: 'domcontentloaded'});
      await waitText('#job-state', 'running');
      await page.click('#cancel-job');
      await page.click('#cancel-confirm');
      await waitText('#job-notice .error', 'may not cancel jobs');
      await waitText('#job-state', 'running');
      await waitText('#job-summary', 'not visible to this token');
      expected = [];
    });

    await stepDo('a viewer sees the overview and the teams page', async () => {
      await page.click('#nav a[data-page="overview"]');
      await page.waitForSelector(`#running-jobs tr[data-job="${OTHER_JOB}"]`);
      await page.waitForSelector('#heatmap-util .heat-cell[data-gpu]');
      await page.click('#nav a[data-page="teams"]');
      await page.waitForSelector('#budgets .panel-body > *');
      await page.waitForSelector('#quotas .panel-body > *');
    });
  } finally {
    await browser.close();
  }
  if (problems.length) {
    throw new Error(`the page reported errors:\n  ${problems.join('\n  ')}`);
  }
}

main().then(() => console.log('ui_test.js: all steps passed'), (err) => {
  console.error(`FAIL: ${err.message}`);
  if (problems.length) console.error(`also:\n  ${problems.join('\n  ')}`);
  process.exit(1);
});
