'use strict';
// The event stream ({loc}v1/events?token=..., docs/push.md).
//
// @openfeature/ofrep-web-provider 0.4.3 under Node with eventsource 3.0.7
// as the global EventSource (Node 20 has none): the provider connects to
// the stream the bulk answer names in eventStreams (its requestUri against
// the provider's base URL), and on a `refetchEvaluation` message
// (data: {"type":"refetchEvaluation",...}, the default "message" event)
// refetches the bulk evaluation. A rollback must reach it within 1 s:
// ConfigurationChanged for the flag, and the value flips. Polling is off
// (pollInterval 0), so only the stream can bring the change.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { EventSource } = require('eventsource');
const { OpenFeature, ProviderEvents } = require('@openfeature/web-sdk');
const { OFREPWebProvider } = require('@openfeature/ofrep-web-provider');
const nginx = require('./lib/nginx');
const { TOKEN, NGINX } = require('./lib/fixture');

const STREAM = `/ofrep/v1/events?token=${TOKEN}`;
const LIMIT_MS = 1000;

// every EventSource the provider makes, and when each opened
const sources = [];
class RecordingEventSource extends EventSource {
    constructor(url, init) {
        super(url, init);
        const rec = { url: String(url), opened: 0 };
        sources.push(rec);
        this.addEventListener('open', () => { rec.opened += 1; });
    }
}

let ng;

before(async () => {
    ng = await nginx.start(NGINX);
    globalThis.EventSource = RecordingEventSource;
});

after(async () => {
    await OpenFeature.close();
    delete globalThis.EventSource;
    if (ng) {
        assert.deepEqual(ng.stop(), [], 'no [alert], [crit] or [emerg] in the error log');
    }
});

// The stream's status and type, without keeping the connection.
async function probe() {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 2000);
    try {
        const res = await fetch(`${ng.base}${STREAM}`, {
            headers: { Accept: 'text/event-stream' }, signal: ac.signal,
        });
        const out = { status: res.status, type: res.headers.get('content-type') };
        ac.abort();
        return out;
    } finally {
        clearTimeout(timer);
    }
}

test('a rollback and its clearing reach the web provider through the event stream within 1 s', async () => {
    const p = await probe();
    assert.equal(p.status, 200, 'the event stream answers 200');
    assert.match(p.type, /^text\/event-stream/);

    const rec = nginx.recordingFetch();
    const changes = [];
    await OpenFeature.setContext('sse', { targetingKey: 'user-1' });
    await OpenFeature.setProviderAndWait('sse', new OFREPWebProvider({
        baseUrl: ng.base,
        headers: [['Authorization', `Bearer ${TOKEN}`]],
        cacheMode: 'disabled',
        pollInterval: 0,
        fetchImplementation: rec,
    }));
    const client = OpenFeature.getClient('sse');
    client.addHandler(ProviderEvents.ConfigurationChanged, (e) => {
        changes.push({ at: Date.now(), flags: e.flagsChanged });
    });
    assert.equal(rec.calls[0].status, 200);
    const tag = rec.calls[0].etag;
    assert.equal(client.getBooleanValue('risky', false), true);

    // one stream, at the base URL's origin + the answer's requestUri
    await nginx.waitFor(() => sources.some((s) => s.opened > 0), 2000, 'the stream to open');
    assert.deepEqual(sources.map((s) => s.url), [`${ng.base}${STREAM}`]);

    await nginx.reportErrors(ng.base, TOKEN, 'risky', 3);
    const reported = Date.now();
    await nginx.waitFor(() => changes.length >= 1, LIMIT_MS + 500, 'ConfigurationChanged');
    assert.ok(changes[0].at - reported <= LIMIT_MS,
              `the rollback arrived after ${changes[0].at - reported} ms`);
    assert.deepEqual(changes[0].flags, ['risky']);
    assert.deepEqual(
        { value: client.getBooleanValue('risky', true),
          reason: client.getBooleanDetails('risky', true).reason,
          meta: { ...client.getBooleanDetails('risky', true).flagMetadata } },
        { value: false, reason: 'DISABLED', meta: { rolloutPercentage: 0, rolledBack: true } });
    // the refetch revalidated the tag it held and got the new answer
    const refetch = rec.calls.find((c, i) => i > 0 && c.status === 200);
    assert.equal(refetch.ifNoneMatch, tag);
    assert.notEqual(refetch.etag, tag);

    await nginx.admin(ng.base, 'DELETE', 'rollbacks/shop/risky');
    const cleared = Date.now();
    await nginx.waitFor(() => changes.length >= 2, LIMIT_MS + 500, 'the second ConfigurationChanged');
    assert.ok(changes[1].at - cleared <= LIMIT_MS,
              `the clearing arrived after ${changes[1].at - cleared} ms`);
    assert.deepEqual(changes[1].flags, ['risky']);
    assert.equal(client.getBooleanValue('risky', false), true);
    // the stream stayed the one connection
    assert.equal(sources.length, 1);
    await OpenFeature.clearProviders('sse');
});
