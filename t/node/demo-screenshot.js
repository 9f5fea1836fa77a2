'use strict';
// The demo's page, as the README shows it: "./build.sh screenshot [file]"
// (docs/demo.md). Not a *.test.js: "./build.sh node" does not run it, since
// it waits a minute for the ramp.
//
// It runs the demo's own configuration, nginx.conf.example with
// examples/flags/, in a temporary directory: only the module's path, the
// three ports (8080, 8081, 8082 become free ones, as t/063-canary-recipe.t
// changes them), nginx's temp directories (under the temporary directory)
// and, as root, a "user root;" line are its own. Then, as a
// visitor of the tour would:
//
//   1. opens http://127.0.0.1:PORT/flags-dashboard/ in Debian's chromium;
//   2. sends GET /flags for a few hundred users (with an accountId, the
//      stickiness of search-v2) and one error report, until search-v2's
//      ramp has climbed from its first stage (60 s hold) to its second;
//   3. breaks the canary as the README does: GET /checkout/ for u1 to u60
//      (plan pro, country de), of whom new-checkout's 25 % get the broken
//      backend's 500, and waits for the ramp's regression rule to roll it
//      back and for the page to show it;
//   4. writes the page's first screen (1280 x 800) as PNG to the file
//      given (default docs/demo.png).
//
// It fails, and writes nothing, when any of this does not happen as said,
// or the page logs a console error. Environment: NGINX_BIN,
// TEST_NGINX_LOAD_MODULES (set by build.sh), CHROMIUM_BIN (default
// /usr/bin/chromium), FLAGS_NODE_KEEP=1 keeps the temporary directory.

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const puppeteer = require('puppeteer-core');
const { freePort, sleep, waitFor } = require('./lib/nginx');

const ROOT = path.resolve(__dirname, '..', '..');
const NGINXCTL = path.join(ROOT, 't', 'helper', 'nginxctl');
const BIN = process.env.NGINX_BIN || '/usr/sbin/nginx';
const MODULE = process.env.TEST_NGINX_LOAD_MODULES
    || path.join(ROOT, 'build', 'ngx_http_flags_module.so');
const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const OUT = path.resolve(process.argv[2] || path.join(ROOT, 'docs', 'demo.png'));
const TOKEN = 'pub_demo_1';

const say = (s) => process.stderr.write(`==> ${s}\n`);

// nginx.conf.example with this run's module, ports and user; every line it
// changes must be there, exactly as many times as t/063 expects.
function demoConf(port, oldPort, newPort) {
    let conf = fs.readFileSync(path.join(ROOT, 'nginx.conf.example'), 'utf8');
    let n = 0;
    const sub = (re, to) => {
        conf = conf.replace(re, () => { n++; return to; });
    };
    const user = process.getuid && process.getuid() === 0 ? '\nuser root;' : '';
    sub(/^load_module modules\/ngx_http_flags_module\.so;/m, `load_module ${MODULE};${user}`);
    sub(/127\.0\.0\.1:8081/g, `127.0.0.1:${oldPort}`);
    sub(/127\.0\.0\.1:8082/g, `127.0.0.1:${newPort}`);
    sub(/127\.0\.0\.1:8080;/g, `127.0.0.1:${port};`);
    if (n !== 6) {
        throw new Error(`nginx.conf.example: ${n} of the 6 lines this script changes (module, 3 ports)`);
    }
    // the temp directories under the prefix, not nginx's compiled-in ones
    // (/var/lib/nginx/body and the like, which nginx creates at its start)
    const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
        .map((k) => `    ${k}_temp_path ${k}_temp;\n`).join('');
    sub(/^http \{\n/m, `http {\n${temp}`);
    if (n !== 7) {
        throw new Error('nginx.conf.example: no "http {" line');
    }
    return conf;
}

async function distinctPorts(k) {
    const ports = new Set();
    while (ports.size < k) {
        ports.add(await freePort());
    }
    return [...ports];
}

async function status(base) {
    const res = await fetch(`${base}/flags-status`);
    if (res.status !== 200) {
        throw new Error(`GET /flags-status answered ${res.status}`);
    }
    const j = await res.json();
    const demo = j.projects.find((p) => p.name === 'demo');
    return Object.fromEntries(demo.flags.map((f) => [f.name, f]));
}

async function get(url, headers) {
    const res = await fetch(url, { headers });
    const body = await res.text();
    return { status: res.status, body };
}

async function main() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-demo-'));
    let pid = 0;
    let browser = null;
    let traffic = null;
    let stop = false;
    try {
        const [port, oldPort, newPort] = await distinctPorts(3);
        for (const d of ['conf', 'conf/flags', 'logs', 'state']) {
            fs.mkdirSync(path.join(dir, d));
        }
        fs.writeFileSync(path.join(dir, 'conf', 'nginx.conf'), demoConf(port, oldPort, newPort));
        for (const f of fs.readdirSync(path.join(ROOT, 'examples', 'flags'))) {
            fs.copyFileSync(path.join(ROOT, 'examples', 'flags', f), path.join(dir, 'conf', 'flags', f));
        }
        pid = Number(execFileSync(NGINXCTL, ['start', dir, String(port), '--bin', BIN],
                                  { encoding: 'utf8' }).trim());
        if (!Number.isInteger(pid) || pid <= 0) {
            throw new Error('nginxctl start printed no PID');
        }
        const base = `http://127.0.0.1:${port}`;
        say(`the demo's nginx.conf.example on ${base} (pid ${pid}, in ${dir})`);

        // 1. the page, open from the start, as the tour says
        const args = ['--disable-gpu', '--no-first-run', '--no-default-browser-check',
                      '--disable-extensions', '--disable-background-networking',
                      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
                      '--hide-scrollbars'];
        if (process.getuid && process.getuid() === 0) {
            args.push('--no-sandbox');
        }
        browser = await puppeteer.launch({
            executablePath: CHROMIUM, headless: true, args,
            defaultViewport: { width: 1280, height: 800 },
        });
        const page = await browser.newPage();
        const problems = [];
        page.on('console', (m) => {
            if (m.type() === 'error' || m.type() === 'warn') {
                problems.push(`console ${m.type()}: ${m.text()}`);
            }
        });
        page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
        await page.goto(`${base}/flags-dashboard/`, { waitUntil: 'load' });
        await page.waitForSelector('article.flag', { timeout: 5000 });

        // 2. evaluations of a few hundred users, a few a second, and the
        // tour's error report, while search-v2 climbs its first stage
        traffic = (async () => {
            for (let i = 0; !stop; i++) {
                const u = i % 400;
                const r = await get(`${base}/flags?userId=user-${u}&trait_accountId=acct-${u}`,
                                    { Authorization: `Bearer ${TOKEN}` });
                if (r.status !== 200) {
                    throw new Error(`GET /flags answered ${r.status}`);
                }
                await sleep(50);
            }
        })();
        traffic.catch(() => {});
        const rep = await fetch(`${base}/ingest/errors`, {
            method: 'POST',
            headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
            body: JSON.stringify({ flagName: 'dark-mode', message: 'TypeError: x is undefined',
                                   stack: 'at a.js:1\nat b.js:2' }),
        });
        if (rep.status !== 204) {
            throw new Error(`the error report answered ${rep.status}`);
        }
        say('waiting for search-v2 to climb to its second stage (about a minute)');
        await waitFor(async () => (await status(base))['search-v2'].ramp.stage >= 1, 120000,
                      'search-v2 at its second stage');

        // 3. the README's loop: u1 to u60, the 25 % of them get the 500
        const answers = {};
        for (let i = 1; i <= 60; i++) {
            const r = await get(`${base}/checkout/`,
                                { Cookie: `uid=u${i}`, 'X-Plan': 'pro', 'X-Country': 'de' });
            answers[r.status] = (answers[r.status] || 0) + 1;
        }
        if (answers[500] !== 12 || answers[200] !== 48) {
            throw new Error(`the canary loop: ${JSON.stringify(answers)}, not 12 500s and 48 200s`);
        }
        const nc = await waitFor(async () => {
            const f = (await status(base))['new-checkout'];
            return f.rolledBack && f;
        }, 15000, 'the rollback of new-checkout');
        if (!nc.ramp.decision || nc.ramp.decision.cause !== 'regression') {
            throw new Error(`new-checkout rolled back, not by its ramp's regression rule: ${JSON.stringify(nc.ramp)}`);
        }
        await page.waitForSelector('article.flag.s-rolledBack[data-flag="new-checkout"]',
                                   { timeout: 5000 });
        // the card gives the deciding tick's counts, as flags_status has them
        const d = nc.ramp.decision;
        const want = `deciding tick: on ${d.on.errors} errors in ${d.on.requests}, ` +
                     `off ${d.off.errors} in ${d.off.requests}`;
        const card = await page.$eval('article.flag[data-flag="new-checkout"]', (e) => e.textContent);
        if (!card.includes(want)) {
            throw new Error(`the rolled-back card does not say "${want}": ${card}`);
        }
        stop = true;
        await traffic;
        traffic = null;
        // a reading or two more for the charts, then the first screen
        await sleep(5500);
        await page.evaluate(() => window.scrollTo(0, 0));
        if (problems.length) {
            throw new Error(`the page: ${problems.join('; ')}`);
        }
        const png = await page.screenshot({ type: 'png' });
        fs.writeFileSync(OUT, png);
        say(`wrote ${OUT} (${png.length} bytes)`);
    } finally {
        stop = true;
        if (traffic) {
            await traffic.catch((e) => say(`the traffic: ${e.message}`));
        }
        if (browser) {
            await browser.close();
        }
        if (pid > 0) {
            execFileSync(NGINXCTL, ['stop', String(pid)]);
        }
        if (!process.env.FLAGS_NODE_KEEP) {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }
}

main().catch((e) => {
    process.stderr.write(`demo-screenshot: ${e.stack || e}\n`);
    process.exit(1);
});
