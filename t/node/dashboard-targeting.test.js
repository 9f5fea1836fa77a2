'use strict';
// The operator's page shows a flag's targeting (issue 26, docs/dashboard.md):
// Debian's chromium driven by puppeteer-core against a real nginx with two
// workers, a runtime project, the page and the admin API behind auth_basic.
//
// A flag with rules and named users reads, on its card, its named users
// (how many on, how many off), then its rules in order with their segments
// ("everyone" for []) and percentages, then the fallthrough; a running
// ramp's stage is shown as the fallthrough's percentage and only there
// (a ramp not yet started leaves the fallthrough its own); an override,
// a kill switch and a rollback, which win over all of it, say so. A flag
// with neither reads as before issue 26. The editor shows a flag's rules
// and named users and sends them back as the document had them.
//
// CHROMIUM_BIN names the browser (default /usr/bin/chromium).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const nginx = require('./lib/nginx');
const { watchPage, launchBrowser } = require('./lib/page');

const LIVE_MS = 2000;
const SCREENSHOT = path.resolve(__dirname, '..', '..', 'build', 'dashboard-targeting.png');
const AUTH = 'Basic ' + Buffer.from('alice:secret').toString('base64');

const CHECKOUT = {
    name: 'checkout', enabled: true, rolloutPercentage: 0,
    rules: [{ segments: ['staff'], rolloutPercentage: 100 }, { segments: [], rolloutPercentage: 10 }],
    // u1 twice: one user
    targets: { on: ['u1', 'u7', 'u1'], off: ['u9'] },
    rollback: { minErrors: 3, rate: 1, window: 60 },
};
const SHOP = {
    flags: [
        CHECKOUT,
        // the ramp's stage (5 %) replaces the fallthrough's 10 %, not the rule's 100 %
        { name: 'search', enabled: true, rolloutPercentage: 10,
          rules: [{ segments: ['staff', 'beta'], rolloutPercentage: 100 }],
          ramp: { stages: [{ percentage: 5, hold: 3600 }, { percentage: 50, hold: 3600 },
                           { percentage: 100 }] } },
        // a ramp that has not started: the fallthrough serves its own
        { name: 'later', enabled: true, rolloutPercentage: 20,
          rules: [{ segments: ['beta'], rolloutPercentage: 50.5 }],
          ramp: { stages: [{ percentage: 30, hold: 3600 }, { percentage: 100 }],
                  startAt: '2099-01-01T00:00:00Z' } },
        // named users without rules: then the flag's own segments
        { name: 'named', enabled: true, rolloutPercentage: 25, segments: ['beta'],
          targets: { on: ['u1'] } },
        // neither: the card reads as before issue 26
        { name: 'plain', enabled: true, rolloutPercentage: 50, segments: ['beta'] },
        { name: 'everyone', enabled: true, rolloutPercentage: 100 },
    ],
    segments: {
        staff: { rules: [{ trait: 'team', op: 'eq', value: 'staff' }] },
        beta: { rules: [{ trait: 'plan', op: 'eq', value: 'beta' }] },
    },
};

const HTTP = `
    flags_project shop token=pub_shop_1 file=shop.json definitions=runtime;
    flags_state_file flags-state.json;
`;
const SERVER = `
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; allow 127.0.0.1; deny all; }
        location /flags-dashboard/ {
            flags_dashboard admin=/flags-admin/;
            auth_basic flags; auth_basic_user_file htpasswd;
        }
        location /flags-admin/ {
            flags_admin;
            auth_basic flags; auth_basic_user_file htpasswd;
        }
`;

let ng;
let browser;
let page;
const requests = [];   // every request the page made
const problems = [];   // console errors, page errors, failed requests

before(async () => {
    ng = await nginx.start({
        flags: { 'shop.json': SHOP },
        files: { htpasswd: 'alice:{PLAIN}secret\n' },
        http: HTTP,
        server: SERVER,
    });
    browser = await launchBrowser(900);
    page = await browser.newPage();
    await page.authenticate({ username: 'alice', password: 'secret' });
    watchPage(page, requests, problems);
});

after(async () => {
    if (browser) {
        await browser.close();
    }
    if (ng) {
        assert.deepEqual(ng.stop(), [], 'no [alert], [crit] or [emerg] in the error log');
    }
});

async function admin(method, rest, body) {
    const headers = { Authorization: AUTH };
    if (body !== undefined) {
        headers['Content-Type'] = 'application/json';
    }
    const res = await fetch(`${ng.base}/flags-admin/${rest}`, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, etag: res.headers.get('etag'), text };
}

async function status() {
    const res = await fetch(`${ng.base}/flags-status`);
    assert.equal(res.status, 200);
    return res.json();
}

function flagOf(doc, name) {
    return doc.projects.find((p) => p.name === 'shop').flags.find((f) => f.name === name);
}

// a card's Targeting row: its lines (a list) or its one text
function targeting(name) {
    return page.evaluate((n) => {
        const a = document.querySelector(`article.flag[data-flag="${n}"]`);
        const dd = [...a.querySelectorAll('dt')].find((d) => d.textContent === 'Targeting').nextElementSibling;
        const ul = dd.querySelector('ul');
        return ul ? [...ul.children].map((li) => li.textContent) : dd.textContent;
    }, name);
}

// waits until a card's Targeting row reads want (at most LIVE_MS)
async function shows(name, want) {
    try {
        await page.waitForFunction((n, w) => {
            const a = document.querySelector(`article.flag[data-flag="${n}"]`);
            if (!a) {
                return false;
            }
            const dd = [...a.querySelectorAll('dt')].find((d) => d.textContent === 'Targeting').nextElementSibling;
            const ul = dd.querySelector('ul');
            const got = ul ? [...ul.children].map((li) => li.textContent) : dd.textContent;
            return JSON.stringify(got) === w;
        }, { timeout: LIVE_MS }, name, JSON.stringify(want));
    } catch (e) {
        throw new Error(`${name}: ${e.message}: ${JSON.stringify(await targeting(name))}`);
    }
}

const CHECKOUT_LINES = [
    'named users: 2 on, 1 off',
    'rule 0: segment staff → 100 %',
    'rule 1: everyone → 10 %',
    'fallthrough: 0 %',
];

test('flags_status gives the rules and the named users\' counts; the cards read them in order', async () => {
    const doc = await status();
    // what the page reads (design: right after "segments"; counts, never ids)
    const c = flagOf(doc, 'checkout');
    assert.deepEqual(c.rules, CHECKOUT.rules);
    assert.deepEqual(c.targets, { on: 2, off: 1 });
    assert.deepEqual(Object.keys(c).slice(Object.keys(c).indexOf('segments'), Object.keys(c).indexOf('segments') + 3),
                     ['segments', 'rules', 'targets']);
    assert.equal(JSON.stringify(doc).includes('"u7"'), false, 'no user id in flags_status');
    assert.deepEqual(flagOf(doc, 'search').ramp.state, 'running');
    assert.deepEqual([flagOf(doc, 'search').ramp.stage, flagOf(doc, 'search').ramp.percentage], [0, 5]);
    assert.equal(flagOf(doc, 'search').effectiveRolloutPercentage, 5);
    assert.equal(flagOf(doc, 'later').effectiveRolloutPercentage, 20);
    assert.deepEqual(flagOf(doc, 'named').targets, { on: 1, off: 0 });
    for (const n of ['plain', 'everyone']) {
        assert.equal('rules' in flagOf(doc, n), false, n);
        assert.equal('targets' in flagOf(doc, n), false, n);
    }

    await page.goto(`${ng.base}/flags-dashboard/`, { waitUntil: 'load' });
    await page.waitForSelector('article.flag[data-flag="everyone"]', { timeout: 5000 });
    assert.deepEqual(await targeting('checkout'), CHECKOUT_LINES);
    assert.deepEqual(await targeting('search'), [
        'rule 0: one of the segments staff, beta → 100 %',
        'fallthrough: 5 %, ramp stage 0 (replaces the fallthrough\'s 10 %; the rules keep theirs)',
    ]);
    assert.deepEqual(await targeting('later'), ['rule 0: segment beta → 50.5 %', 'fallthrough: 20 %']);
    assert.deepEqual(await targeting('named'), ['named users: 1 on, 0 off', 'everyone else: segment beta']);
    // without rules or targets: one line, as before issue 26
    assert.equal(await targeting('plain'), 'segment beta');
    assert.equal(await targeting('everyone'), 'everyone (no segment)');
    // the card's other rows are unchanged: the ramp's own row, the served percentage
    const text = await page.$eval('article.flag[data-flag="search"]', (a) => a.textContent);
    assert.match(text, /Served5 % fallthrough, configured 10 %/);
    // on or off for everyone only when every rule, the fallthrough and the
    // named users are: checkout's fallthrough of 0 % is no "off"
    const badges = await page.$$eval('article.flag', (as) => as.map((a) => [a.dataset.flag,
        a.querySelector('.badge:not(.full)').textContent,
        a.querySelector('dd .pct').parentNode.textContent]));
    assert.deepEqual(badges, [
        ['checkout', 'partial', '0 % fallthrough, configured 0 %'],
        ['search', 'ramp running', '5 % fallthrough, configured 10 %'],
        ['later', 'ramp holding', '20 % fallthrough, configured 20 %'],
        ['named', 'partial', '25 % configured 25 %'],
        ['plain', 'partial', '50 % configured 50 %'],
        ['everyone', 'on', '100 % configured 100 %'],
    ]);
    assert.match(text, /stage 0 of 3 \(5 %\), running/);
    // every line is whole
    const cut = await page.$$eval('article.flag dd', (dds) => dds
        .filter((d) => d.scrollHeight > d.clientHeight + 1 || d.scrollWidth > d.clientWidth + 1)
        .map((d) => d.closest('article').dataset.flag + ': ' + d.textContent));
    assert.deepEqual(cut, []);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: SCREENSHOT, type: 'png' });
    assert.deepEqual(problems, []);
});

test('a paused ramp\'s stage still stands in for the fallthrough; a resumed one too', async () => {
    assert.equal((await admin('PUT', 'ramps/shop/search', { action: 'pause' })).status, 204);
    assert.equal(flagOf(await status(), 'search').ramp.state, 'paused');
    await shows('search', [
        'rule 0: one of the segments staff, beta → 100 %',
        'fallthrough: 5 %, ramp stage 0 (replaces the fallthrough\'s 10 %; the rules keep theirs)',
    ]);
    assert.equal((await admin('PUT', 'ramps/shop/search', { action: 'resume' })).status, 204);
    assert.equal(flagOf(await status(), 'search').ramp.state, 'running');
    assert.deepEqual(problems, []);
});

const EDIT = (f) => `article.flag[data-flag="${f}"] button[data-action="edit"]:not([hidden])`;

test('the editor shows the rules and named users and sends them back as the document has them', async () => {
    const mark = requests.length;
    await page.$eval(EDIT('checkout'), (e) => e.scrollIntoView({ block: 'center' }));
    await page.click(EDIT('checkout'));
    await page.waitForFunction(() => !document.getElementById('defs-edit').hidden, { timeout: 3000 });
    const form = () => page.evaluate(() => ({
        label: document.getElementById('defs-pct-label').textContent,
        pct: document.getElementById('defs-pct').value,
        shown: !document.getElementById('defs-tgt').hidden,
        lines: [...document.querySelectorAll('#defs-tgtlist li')].map((l) => l.textContent),
        legend: document.getElementById('defs-segs-legend').textContent,
        boxes: [...document.querySelectorAll('#defs-seglist input')].map((b) => [b.value, b.checked, b.disabled]),
    }));
    assert.deepEqual(await form(), {
        label: 'Fallthrough percentage, when no rule matches (0 to 100)',
        pct: '0',
        shown: true,
        lines: CHECKOUT_LINES.slice(0, 3),
        legend: 'Segments: set by the flag\'s rules (edit the document)',
        boxes: [['staff', false, true], ['beta', false, true]],
    });
    await page.click('#defs-pct', { clickCount: 3 });
    await page.keyboard.press('Backspace');
    await page.keyboard.type('20');
    await page.click('#defs-preview');
    await page.waitForFunction(() => !document.getElementById('defs-diff').hidden, { timeout: 3000 });
    const fields = await page.$$eval('#defs-diff ul.fields li', (l) => l.map((e) => e.textContent));
    assert.deepEqual(fields, ['checkout: rolloutPercentage (fallthrough): 0 % → 20 %']);
    assert.deepEqual(await page.$$eval('#defs-diff ul.lists li', (l) => l.map((e) => e.textContent)),
                     ['Added: –', 'Changed: checkout', 'Removed: –']);
    // the body: the document's flag, ids and duplicates included, one field changed
    const puts = () => requests.slice(mark).filter((r) => r.method === 'PUT');
    assert.equal(puts().length, 1);
    assert.equal(new URL(puts()[0].url).pathname + new URL(puts()[0].url).search,
                 '/flags-admin/definitions/shop/flags/checkout?dryRun=1');
    assert.deepEqual(JSON.parse(puts()[0].body), { ...CHECKOUT, rolloutPercentage: 20 });

    await page.click('#defs-apply');
    await page.waitForFunction(() => /^Edit shop\/checkout: /.test(document.getElementById('answer-text').textContent),
                               { timeout: 5000 });
    assert.equal(await page.$eval('#answer-text', (e) => e.textContent),
                 'Edit shop/checkout: version 2 applied (added: –; changed: checkout; removed: –)');
    assert.equal(puts()[1].body, puts()[0].body);
    // the server keeps what was sent, and the card follows
    const doc = JSON.parse((await admin('GET', 'definitions/shop')).text);
    assert.deepEqual(doc.flags.find((f) => f.name === 'checkout'), { ...CHECKOUT, rolloutPercentage: 20 });
    assert.deepEqual(flagOf(await status(), 'checkout').targets, { on: 2, off: 1 });
    await shows('checkout', [...CHECKOUT_LINES.slice(0, 3), 'fallthrough: 20 %']);
    assert.deepEqual(problems, []);
});

test('an override, a kill switch and a rollback say they win over the rules and the named users', async () => {
    const lines = [...CHECKOUT_LINES.slice(0, 3), 'fallthrough: 20 %'];
    assert.equal((await admin('PUT', 'overrides/shop/checkout', { rolloutPercentage: 5 })).status, 204);
    await shows('checkout', [...lines, 'override 5 % replaces every percentage, the rules\' too; named users set aside']);
    assert.equal((await admin('PUT', 'overrides/shop/named', { enabled: false })).status, 204);
    await shows('named', ['named users: 1 on, 0 off', 'everyone else: segment beta', 'off for everyone, named users too']);
    assert.equal((await admin('PUT', 'overrides/shop/search', { rolloutPercentage: 40 })).status, 204);
    await shows('search', [
        'rule 0: one of the segments staff, beta → 100 %',
        'fallthrough: 5 %, ramp stage 0 (replaces the fallthrough\'s 10 %; the rules keep theirs)',
        'override 40 % replaces every percentage, the rules\' too',
    ]);
    for (const f of ['checkout', 'named', 'search']) {
        assert.equal((await admin('DELETE', `overrides/shop/${f}`)).status, 204);
    }
    await shows('checkout', lines);
    await shows('named', ['named users: 1 on, 0 off', 'everyone else: segment beta']);
    // a flag without rules or targets has no such line: its card as before
    assert.equal((await admin('PUT', 'overrides/shop/plain', { rolloutPercentage: 5 })).status, 204);
    await page.waitForSelector('article.flag.s-overridden[data-flag="plain"]', { timeout: LIVE_MS });
    assert.equal(await targeting('plain'), 'segment beta');
    assert.equal((await admin('DELETE', 'overrides/shop/plain')).status, 204);

    // a rollback reaches named users too
    await nginx.reportErrors(ng.base, 'pub_shop_1', 'checkout', 3);
    await page.waitForSelector('article.flag.s-rolledBack[data-flag="checkout"]', { timeout: LIVE_MS });
    assert.equal(flagOf(await status(), 'checkout').rolledBack, true);
    await shows('checkout', [...lines, 'rolled back: off for everyone, named users too']);
    assert.equal((await admin('DELETE', 'rollbacks/shop/checkout')).status, 204);
    await shows('checkout', lines);
    assert.deepEqual(problems, []);
});
