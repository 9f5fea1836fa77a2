'use strict';
// @openfeature/ofrep-web-provider 0.4.3 with @openfeature/web-sdk 1.10.0,
// run under Node, against flags_ofrep's bulk evaluation (docs/ofrep.md):
// the provider fetches every flag in one POST /ofrep/v1/evaluate/flags,
// keeps the ETag and revalidates with If-None-Match; a new targetingKey
// refetches without it. Polling is the change detection here: no
// EventSource is defined in this process, so the provider skips the
// eventStreams the answer names (the SSE case is web-provider-sse.test.js).
// The provider's localStorage cache does not exist under Node:
// cacheMode 'disabled' says so.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { OpenFeature, ProviderEvents } = require('@openfeature/web-sdk');
const { OFREPWebProvider } = require('@openfeature/ofrep-web-provider');
const nginx = require('./lib/nginx');
const { TOKEN, NGINX, FLAG_NAMES } = require('./lib/fixture');

const BULK = '/ofrep/v1/evaluate/flags';
const TAG = /^"[0-9a-f]{16}"$/;

let ng;

before(async () => {
    assert.equal(typeof globalThis.EventSource, 'undefined');
    ng = await nginx.start(NGINX);
});

after(async () => {
    await OpenFeature.close();
    if (ng) {
        assert.deepEqual(ng.stop(), [], 'no [alert], [crit] or [emerg] in the error log');
    }
});

function provider(fetchImplementation, extra = {}) {
    return new OFREPWebProvider({
        baseUrl: ng.base,
        headers: [['Authorization', `Bearer ${TOKEN}`]],
        cacheMode: 'disabled',
        fetchImplementation,
        ...extra,
    });
}

function pick(d) {
    const o = { value: d.value, reason: d.reason, variant: d.variant,
                flagMetadata: { ...d.flagMetadata } };
    if (d.errorCode !== undefined) {
        o.errorCode = d.errorCode;
    }
    return o;
}

// every flag of the client equals GET /flags for the same caller
async function assertSameAsGet(client, userId, traits) {
    const g = await nginx.getFlags(ng.base, TOKEN, userId, traits);
    for (const name of FLAG_NAMES) {
        const d = client.getBooleanDetails(name, !g[name].enabled);
        assert.equal(d.errorCode, undefined, `${name}: no error`);
        assert.equal(d.value, g[name].enabled, `${name} for ${userId}`);
        assert.equal(d.variant, g[name].enabled ? 'on' : 'off', name);
        assert.equal(d.flagMetadata.rolloutPercentage, g[name].rolloutPercentage, name);
    }
    return g;
}

// the access log's lines of the bulk endpoint
function bulkLines() {
    return ng.accessLog().filter((l) => l.startsWith(`POST ${BULK} `));
}

test('bulk evaluation, then 304 on every poll while nothing changes; a rollback is a 200 with a new tag', async () => {
    const rec = nginx.recordingFetch();
    const changes = [];
    await OpenFeature.setContext('poll', { targetingKey: 'user-1', plan: 'pro' });
    await OpenFeature.setProviderAndWait('poll', provider(rec, { pollInterval: 150,
                                                                 changeDetection: 'polling' }));
    const client = OpenFeature.getClient('poll');
    client.addHandler(ProviderEvents.ConfigurationChanged, (e) => changes.push(e.flagsChanged));

    assert.equal(rec.calls[0].status, 200);
    assert.equal(rec.calls[0].ifNoneMatch, null);
    const tag = rec.calls[0].etag;
    assert.match(tag, TAG);
    await assertSameAsGet(client, 'user-1', { plan: 'pro' });
    assert.deepEqual(pick(client.getBooleanDetails('pro-only', false)),
                     { value: true, reason: 'TARGETING_MATCH', variant: 'on',
                       flagMetadata: { rolloutPercentage: 100, rolledBack: false,
                                       segmentMatched: true } });
    assert.deepEqual(pick(client.getBooleanDetails('killed', true)),
                     { value: false, reason: 'DISABLED', variant: 'off',
                       flagMetadata: { rolloutPercentage: 100, rolledBack: false } });
    // a flag the project does not have: the provider's own FLAG_NOT_FOUND
    const nf = client.getBooleanDetails('nope', true);
    assert.equal(nf.value, true);
    assert.equal(nf.errorCode, 'FLAG_NOT_FOUND');

    // two polls: both revalidate with the tag and get a 304 carrying it
    await nginx.waitFor(() => rec.calls.length >= 3, 3000, 'two polls');
    for (const c of rec.calls.slice(1, 3)) {
        assert.deepEqual({ status: c.status, ifNoneMatch: c.ifNoneMatch, etag: c.etag },
                         { status: 304, ifNoneMatch: tag, etag: tag });
    }
    // the server's side: the access log has the 200 and then 304s
    await nginx.waitFor(() => bulkLines().length >= 3, 2000, 'three access log lines');
    const lines = bulkLines();
    assert.equal(lines[0], `POST ${BULK} 200 inm= etag=${tag}`);
    assert.equal(lines[1], `POST ${BULK} 304 inm=${tag} etag=${tag}`);
    assert.equal(lines[2], `POST ${BULK} 304 inm=${tag} etag=${tag}`);
    assert.deepEqual(changes, []);
    assert.equal(client.getBooleanValue('risky', false), true);

    // a rollback: the next poll is a 200 with another tag, the provider
    // reports the one flag that changed and answers the new value
    await nginx.reportErrors(ng.base, TOKEN, 'risky', 3);
    await nginx.waitFor(() => changes.length === 1, 3000, 'ConfigurationChanged');
    assert.deepEqual(changes, [['risky']]);
    const after = rec.calls.find((c) => c.status === 200 && c.ifNoneMatch === tag);
    assert.ok(after, 'a 200 answered the old tag');
    assert.match(after.etag, TAG);
    assert.notEqual(after.etag, tag);
    assert.deepEqual(pick(client.getBooleanDetails('risky', true)),
                     { value: false, reason: 'DISABLED', variant: 'off',
                       flagMetadata: { rolloutPercentage: 0, rolledBack: true } });
    await assertSameAsGet(client, 'user-1', { plan: 'pro' });

    // cleared: the state is the old one again, and so is the tag
    await nginx.admin(ng.base, 'DELETE', 'rollbacks/shop/risky');
    await nginx.waitFor(() => changes.length === 2, 3000, 'the second ConfigurationChanged');
    assert.deepEqual(changes[1], ['risky']);
    assert.equal(rec.calls[rec.calls.length - 1].etag, tag);
    assert.deepEqual(pick(client.getBooleanDetails('risky', false)),
                     { value: true, reason: 'STATIC', variant: 'on',
                       flagMetadata: { rolloutPercentage: 100, rolledBack: false } });
    await OpenFeature.clearProviders('poll');
});

test('a context change refetches: a new targetingKey without If-None-Match, a new trait with it', async () => {
    const rec = nginx.recordingFetch();
    const contextChanges = [];
    await OpenFeature.setContext('ctx', { targetingKey: 'user-1' });
    await OpenFeature.setProviderAndWait('ctx', provider(rec, { pollInterval: 0 }));
    const client = OpenFeature.getClient('ctx');
    client.addHandler(ProviderEvents.ContextChanged, () => contextChanges.push(1));
    assert.equal(rec.calls.length, 1);
    assert.equal(rec.calls[0].status, 200);
    const tag1 = rec.calls[0].etag;
    const g1 = await assertSameAsGet(client, 'user-1', {});

    await OpenFeature.setContext('ctx', { targetingKey: 'user-2' });
    assert.equal(rec.calls.length, 2);
    assert.deepEqual({ status: rec.calls[1].status, ifNoneMatch: rec.calls[1].ifNoneMatch },
                     { status: 200, ifNoneMatch: null });
    const tag2 = rec.calls[1].etag;
    assert.match(tag2, TAG);
    assert.notEqual(tag2, tag1);
    const g2 = await assertSameAsGet(client, 'user-2', {});
    // the two users differ somewhere, so the answers were the new user's
    assert.ok(FLAG_NAMES.some((n) => g1[n].enabled !== g2[n].enabled), 'user-1 and user-2 differ');
    assert.equal(contextChanges.length, 1);

    // same targetingKey, another trait: revalidated with the tag, which the
    // caller's traits change, so a 200 with the pro answers
    await OpenFeature.setContext('ctx', { targetingKey: 'user-2', plan: 'pro' });
    assert.equal(rec.calls.length, 3);
    assert.deepEqual({ status: rec.calls[2].status, ifNoneMatch: rec.calls[2].ifNoneMatch },
                     { status: 200, ifNoneMatch: tag2 });
    assert.notEqual(rec.calls[2].etag, tag2);
    await assertSameAsGet(client, 'user-2', { plan: 'pro' });
    assert.equal(client.getBooleanValue('pro-only', false), true);

    const lines = bulkLines().slice(-3);
    assert.equal(lines[0], `POST ${BULK} 200 inm= etag=${tag1}`);
    assert.equal(lines[1], `POST ${BULK} 200 inm= etag=${tag2}`);
    assert.equal(lines[2], `POST ${BULK} 200 inm=${tag2} etag=${rec.calls[2].etag}`);
    await OpenFeature.clearProviders('ctx');
});

test('an unknown token: initialisation fails fatally, evaluations give the default', async () => {
    const rec = nginx.recordingFetch();
    const p = new OFREPWebProvider({ baseUrl: ng.base, cacheMode: 'disabled',
                                     headers: [['Authorization', 'Bearer pub_nobody']],
                                     fetchImplementation: rec });
    await OpenFeature.setContext('bad', { targetingKey: 'user-1' });
    await assert.rejects(OpenFeature.setProviderAndWait('bad', p), { name: 'ProviderFatalError' });
    assert.deepEqual(rec.calls.map((c) => c.status), [401]);
    const d = OpenFeature.getClient('bad').getBooleanDetails('on', false);
    assert.equal(d.value, false);
    assert.equal(d.reason, 'ERROR');
    assert.equal(d.errorCode, 'PROVIDER_FATAL');
    await OpenFeature.clearProviders('bad');
});
