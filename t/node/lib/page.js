'use strict';
// What the page tests watch in chromium: every request the page makes
// (into requests) and every problem (into problems): a console error or
// warning, an uncaught error, a failed request. The event stream is cut
// when the page goes away, which is no failure.

function watchPage(page, requests, problems) {
    page.on('request', (r) => {
        requests.push({ url: r.url(), method: r.method(), headers: r.headers(),
                        body: r.postData() });
    });
    page.on('console', (m) => {
        if (m.type() === 'error' || m.type() === 'warn') {
            problems.push(`console ${m.type()}: ${m.text()}`);
        }
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('requestfailed', (r) => {
        if (!/\/events$/.test(r.url())) {
            problems.push(`request failed: ${r.url()} ${r.failure() && r.failure().errorText}`);
        }
    });
}

// Debian's chromium (CHROMIUM_BIN, default /usr/bin/chromium), headless,
// through puppeteer-core: quiet (no background networking, updates or
// sync), without the sandbox when run as root, at width x height.
async function launchBrowser(height = 800, width = 1280) {
    const puppeteer = require('puppeteer-core');
    const args = ['--disable-gpu', '--no-first-run', '--no-default-browser-check',
                  '--disable-extensions', '--disable-background-networking',
                  '--disable-component-update', '--disable-sync', '--metrics-recording-only',
                  '--disable-dev-shm-usage'];
    if (process.getuid && process.getuid() === 0) {
        args.push('--no-sandbox');
    }
    return puppeteer.launch({
        executablePath: process.env.CHROMIUM_BIN || '/usr/bin/chromium',
        headless: true, args,
        defaultViewport: { width, height },
    });
}

module.exports = { watchPage, launchBrowser };
