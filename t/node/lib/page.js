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

module.exports = { watchPage };
