'use strict';
// The operator's page (flags_dashboard, docs/dashboard.md) of a host in a
// fleet: its "Fleet sync" line says how old the host's view of the fleet
// is (flags_status's staleSeconds), and marks it stale past 3 intervals,
// the FlagsFleetStale alert's threshold (docs/sync.md, "Staleness").
// Debian's redis-server, started here on a free port in a directory of
// this test, and stopped (by its PID) to make the host stale; Debian's
// chromium driven by puppeteer-core.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const nginx = require('./lib/nginx');
const { watchPage, launchBrowser } = require('./lib/page');

const REDIS = process.env.REDIS_SERVER_BIN || '/usr/bin/redis-server';

const SHOP = { flags: [{ name: 'new-checkout', enabled: true, rolloutPercentage: 25 }] };

let ng;
let redis;
let redisDir;
let browser;
let page;
const requests = [];
const problems = [];

async function redisStart(port) {
    redis = spawn(REDIS, ['--port', String(port), '--bind', '127.0.0.1', '--save', '',
                          '--appendonly', 'no', '--dir', redisDir],
                  { stdio: 'ignore' });
    await nginx.waitFor(() => new Promise((resolve) => {
        const s = require('node:net').connect(port, '127.0.0.1');
        s.on('connect', () => { s.destroy(); resolve(true); });
        s.on('error', () => resolve(false));
    }), 5000, 'redis-server to listen');
}

function redisStop() {
    if (redis && redis.exitCode === null) {
        redis.kill('SIGKILL');
    }
    redis = null;
}

before(async () => {
    redisDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-node-redis-'));
    const rport = await nginx.freePort();
    await redisStart(rport);
    ng = await nginx.start({
        flags: { 'shop.json': SHOP },
        http: `
    flags_project shop token=pub_shop_1 file=shop.json;
    flags_sync redis://127.0.0.1:${rport} interval=200ms prefix=node-fleet: host=h1;
`,
        server: `
        location = /flags-status { flags_status; allow 127.0.0.1; deny all; }
        location /flags-dashboard/ { flags_dashboard; allow 127.0.0.1; deny all; }
`,
    });
    browser = await launchBrowser(800);
    page = await browser.newPage();
    watchPage(page, requests, problems);
});

after(async () => {
    if (browser) {
        await browser.close();
    }
    redisStop();
    if (ng) {
        assert.deepEqual(ng.stop(), [], 'no [alert], [crit] or [emerg] in the error log');
    }
    if (redisDir) {
        fs.rmSync(redisDir, { recursive: true, force: true });
    }
});

async function status() {
    const res = await fetch(`${ng.base}/flags-status`);
    assert.equal(res.status, 200);
    return res.json();
}

function syncLine() {
    return page.evaluate(() => {
        const e = document.getElementById('sync');
        return { text: e.textContent, cls: e.className };
    });
}

test('the page says how old the fleet view is, and marks it stale past 3 intervals', async () => {
    // flags_status carries what the page reads: the age and the interval
    const doc = await nginx.waitFor(async () => {
        const d = await status();
        return d.sync && d.sync.connected && typeof d.sync.staleSeconds === 'number' ? d : null;
    }, 5000, 'a first round');
    assert.equal(doc.sync.intervalMs, 200);
    assert.ok(doc.sync.staleSeconds >= 0 && doc.sync.staleSeconds < 2,
              `fresh: ${doc.sync.staleSeconds} s`);

    await page.goto(`${ng.base}/flags-dashboard/`, { waitUntil: 'load' });
    const fresh = await nginx.waitFor(async () => {
        const l = await syncLine();
        return /^Fleet sync: connected, view \d+(\.\d)? s old, lag \d+ ms, /.test(l.text) ? l : null;
    }, 5000, 'the fleet line of a fresh host');
    assert.equal(fresh.cls, 'line good', fresh.text);
    assert.doesNotMatch(fresh.text, /STALE/);

    // Redis gone: the view ages; past 0.6 s (3 intervals) the line says so
    redisStop();
    const stale = await nginx.waitFor(async () => {
        const l = await syncLine();
        return /STALE: view \d+(\.\d)? s old \(over 3 intervals of 200 ms\)/.test(l.text) ? l : null;
    }, 10000, 'the fleet line of a stale host');
    assert.equal(stale.cls, 'line bad', stale.text);
    const age = Number(/view (\d+(?:\.\d)?) s old/.exec(stale.text)[1]);
    assert.ok(age > 0.6, `stale at ${age} s`);
    const after = (await status()).sync;
    assert.ok(after.staleSeconds * 1000 > 3 * after.intervalMs,
              `flags_status agrees: ${after.staleSeconds} s`);

    assert.deepEqual(problems, [], 'no console error or failed request');
    assert.deepEqual(requests.filter((r) => new URL(r.url).origin !== ng.base)
                         .map((r) => r.url), [], 'no request to another origin');
});
