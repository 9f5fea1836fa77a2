'use strict';
// @openfeature/ofrep-provider 0.1.3 with @openfeature/server-sdk 1.23.0
// against flags_ofrep (docs/ofrep.md): every evaluation is one
// POST /ofrep/v1/evaluate/flags/{key}, so each answer is checked against
// GET /flags for the same user and traits, and against the reason, variant
// and metadata the doc defines.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { OpenFeature } = require('@openfeature/server-sdk');
const { OFREPProvider } = require('@openfeature/ofrep-provider');
const nginx = require('./lib/nginx');
const { TOKEN, NGINX, FLAG_NAMES, HAS_SEGMENTS } = require('./lib/fixture');

let ng;
let client;

before(async () => {
    ng = await nginx.start(NGINX);
    await OpenFeature.setProviderAndWait(new OFREPProvider({
        baseUrl: ng.base,
        headers: [['Authorization', `Bearer ${TOKEN}`]],
    }));
    client = OpenFeature.getClient();
});

after(async () => {
    await OpenFeature.close();
    if (ng) {
        assert.deepEqual(ng.stop(), [], 'no [alert], [crit] or [emerg] in the error log');
    }
});

// what a test compares of the SDK's evaluation details
function pick(d) {
    const o = { value: d.value, reason: d.reason, variant: d.variant,
                flagMetadata: { ...d.flagMetadata } };
    if (d.errorCode !== undefined) {
        o.errorCode = d.errorCode;
    }
    return o;
}

// The answer docs/ofrep.md gives for a flag that GET /flags shows as g
// (value, variant, metadata; the reason is asserted case by case).
function expectedFrom(name, g, extra = {}) {
    const meta = { rolloutPercentage: g.rolloutPercentage, rolledBack: false, ...extra };
    return { value: g.enabled, variant: g.enabled ? 'on' : 'off', meta };
}

const USERS = ['user-1', 'user-2', 'user-3', 'user-4', 'user-5', 'user-6', 'user-7', 'user-8'];
const TRAITS = [{}, { plan: 'pro' }, { plan: 'free', accountId: 'acct-7' }];

test('every flag for 8 users x 3 trait sets equals GET /flags (value, variant, percentage)', async () => {
    const halfSeen = new Set();
    for (const userId of USERS) {
        for (const traits of TRAITS) {
            const g = await nginx.getFlags(ng.base, TOKEN, userId, traits);
            assert.deepEqual(Object.keys(g), FLAG_NAMES);
            for (const name of FLAG_NAMES) {
                const d = await client.getBooleanDetails(name, !g[name].enabled,
                                                         { targetingKey: userId, ...traits });
                const e = expectedFrom(name, g[name]);
                assert.equal(d.errorCode, undefined, `${name} ${userId}: no error`);
                assert.equal(d.value, e.value, `${name} for ${userId} ${JSON.stringify(traits)}`);
                assert.equal(d.variant, e.variant);
                assert.equal(d.flagMetadata.rolloutPercentage, e.meta.rolloutPercentage);
                assert.equal(d.flagMetadata.rolledBack, false);
                assert.equal('segmentMatched' in d.flagMetadata, HAS_SEGMENTS.has(name),
                             `${name}: segmentMatched only for flags with segments`);
                if (name === 'half') {
                    halfSeen.add(d.value);
                }
            }
        }
    }
    // the 50 % flag splits these users both ways, so the comparison can fail
    assert.deepEqual([...halfSeen].sort(), [false, true]);
});

test('reasons, variants and metadata as docs/ofrep.md lists them', async () => {
    const ctx = { targetingKey: 'user-1', plan: 'pro' };
    const g = await nginx.getFlags(ng.base, TOKEN, 'user-1', { plan: 'pro' });
    const cases = {
        on: { value: true, reason: 'STATIC', variant: 'on',
              flagMetadata: { rolloutPercentage: 100, rolledBack: false } },
        zero: { value: false, reason: 'STATIC', variant: 'off',
                flagMetadata: { rolloutPercentage: 0, rolledBack: false } },
        // switched off in its file: keeps its configured percentage
        killed: { value: false, reason: 'DISABLED', variant: 'off',
                  flagMetadata: { rolloutPercentage: 100, rolledBack: false } },
        half: { value: g.half.enabled, reason: 'SPLIT', variant: g.half.enabled ? 'on' : 'off',
                flagMetadata: { rolloutPercentage: 50, rolledBack: false } },
        fine: { value: g.fine.enabled, reason: 'SPLIT', variant: g.fine.enabled ? 'on' : 'off',
                flagMetadata: { rolloutPercentage: 12.345, rolledBack: false } },
        'pro-only': { value: true, reason: 'TARGETING_MATCH', variant: 'on',
                      flagMetadata: { rolloutPercentage: 100, rolledBack: false,
                                      segmentMatched: true } },
        // a segment matched, then the split decides
        'pro-half': { value: g['pro-half'].enabled, reason: 'SPLIT',
                      variant: g['pro-half'].enabled ? 'on' : 'off',
                      flagMetadata: { rolloutPercentage: 50, rolledBack: false,
                                      segmentMatched: true } },
        heavy: { value: false, reason: 'TARGETING_MATCH', variant: 'off',
                 flagMetadata: { rolloutPercentage: 100, rolledBack: false,
                                 segmentMatched: false } },
    };
    for (const [name, want] of Object.entries(cases)) {
        assert.deepEqual(pick(await client.getBooleanDetails(name, false, ctx)), want, name);
    }
    // no targetingKey: an anonymous caller, a partial rollout is off (SPLIT)
    assert.deepEqual(pick(await client.getBooleanDetails('half', true, { plan: 'pro' })),
                     { value: false, reason: 'SPLIT', variant: 'off',
                       flagMetadata: { rolloutPercentage: 50, rolledBack: false } });
    assert.deepEqual(pick(await client.getBooleanDetails('on', false, {})),
                     { value: true, reason: 'STATIC', variant: 'on',
                       flagMetadata: { rolloutPercentage: 100, rolledBack: false } });
});

test('an unknown flag: the default value with FLAG_NOT_FOUND and the server\'s message', async () => {
    const res = await fetch(`${ng.base}/ofrep/v1/evaluate/flags/nope`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
        body: '{"context":{"targetingKey":"user-1"}}',
    });
    assert.equal(res.status, 404);
    const body = await res.json();
    assert.equal(body.key, 'nope');
    assert.equal(body.errorCode, 'FLAG_NOT_FOUND');
    for (const dflt of [true, false]) {
        const d = await client.getBooleanDetails('nope', dflt, { targetingKey: 'user-1' });
        assert.equal(d.value, dflt);
        assert.equal(d.reason, 'ERROR');
        assert.equal(d.errorCode, 'FLAG_NOT_FOUND');
        assert.equal(d.errorMessage, body.errorDetails);
    }
});

test('targetingKey and traits: strings, numbers, booleans, null, stickiness', async () => {
    // {sessions: 42} is the trait "42", {beta: true} the trait "true"
    const ctx = { targetingKey: 'user-3', sessions: 42, beta: true, plan: null };
    for (const name of ['heavy', 'testers']) {
        assert.deepEqual(pick(await client.getBooleanDetails(name, false, ctx)),
                         { value: true, reason: 'TARGETING_MATCH', variant: 'on',
                           flagMetadata: { rolloutPercentage: 100, rolledBack: false,
                                           segmentMatched: true } }, name);
    }
    // the same caller through GET /flags: null is no trait
    const g = await nginx.getFlags(ng.base, TOKEN, 'user-3', { sessions: '42', beta: 'true' });
    for (const name of FLAG_NAMES) {
        assert.equal(await client.getBooleanValue(name, !g[name].enabled, ctx), g[name].enabled,
                     name);
    }
    // stickiness: by-account takes its key from accountId, not targetingKey
    const accounts = new Set();
    for (const acct of ['acct-1', 'acct-2', 'acct-3', 'acct-4', 'acct-5', 'acct-6']) {
        const want = (await nginx.getFlags(ng.base, TOKEN, 'someone', { accountId: acct }))
            ['by-account'].enabled;
        for (const user of ['user-1', 'user-2']) {
            assert.equal(await client.getBooleanValue('by-account', !want,
                                                      { targetingKey: user, accountId: acct }),
                         want, `${acct} ${user}`);
        }
        accounts.add(want);
    }
    assert.deepEqual([...accounts].sort(), [false, true]);
    // an object-valued property is refused: INVALID_CONTEXT, the default value
    const d = await client.getBooleanDetails('on', false,
                                             { targetingKey: 'user-1', address: { city: 'x' } });
    assert.equal(d.value, false);
    assert.equal(d.reason, 'ERROR');
    assert.equal(d.errorCode, 'INVALID_CONTEXT');
    assert.match(d.errorMessage, /address/);
});

test('authentication: an unknown token or none is a 401 and the default value', async () => {
    const res = await fetch(`${ng.base}/ofrep/v1/evaluate/flags/on`, {
        method: 'POST', headers: { Authorization: 'Bearer pub_nobody' }, body: '{}',
    });
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('www-authenticate'), 'Bearer error="invalid_token"');
    assert.equal(await res.text(), '');
    const providers = {
        'bad-token': new OFREPProvider({ baseUrl: ng.base,
                                         headers: [['Authorization', 'Bearer pub_nobody']] }),
        'no-token': new OFREPProvider({ baseUrl: ng.base }),
    };
    for (const [domain, provider] of Object.entries(providers)) {
        await OpenFeature.setProviderAndWait(domain, provider);
        const c = OpenFeature.getClient(domain);
        for (const dflt of [true, false]) {
            const d = await c.getBooleanDetails('on', dflt, { targetingKey: 'user-1' });
            assert.equal(d.value, dflt, domain);
            assert.equal(d.reason, 'ERROR', domain);
            // the provider throws OFREPApiUnauthorizedError, which has no code
            assert.equal(d.errorCode, 'GENERAL', domain);
        }
    }
    // and the good provider is unaffected
    assert.equal(await client.getBooleanValue('on', false, { targetingKey: 'user-1' }), true);
});

test('a rollback (3 error reports) and its clearing are seen on the next evaluation', async () => {
    const ctx = { targetingKey: 'user-1' };
    assert.deepEqual(pick(await client.getBooleanDetails('risky', false, ctx)),
                     { value: true, reason: 'STATIC', variant: 'on',
                       flagMetadata: { rolloutPercentage: 100, rolledBack: false } });
    await nginx.reportErrors(ng.base, TOKEN, 'risky', 3);
    const rolledBack = { value: false, reason: 'DISABLED', variant: 'off',
                         flagMetadata: { rolloutPercentage: 0, rolledBack: true } };
    assert.deepEqual(pick(await client.getBooleanDetails('risky', true, ctx)), rolledBack);
    assert.deepEqual(pick(await client.getBooleanDetails('risky', true,
                                                         { targetingKey: 'user-2' })), rolledBack);
    const g = await nginx.getFlags(ng.base, TOKEN, 'user-1');
    assert.deepEqual(g.risky, { name: 'risky', enabled: false, rolloutPercentage: 0,
                                segments: [] });
    await nginx.admin(ng.base, 'DELETE', 'rollbacks/shop/risky');
    assert.deepEqual(pick(await client.getBooleanDetails('risky', false, ctx)),
                     { value: true, reason: 'STATIC', variant: 'on',
                       flagMetadata: { rolloutPercentage: 100, rolledBack: false } });
});

test('an override through flags_admin: kill, percentage, removal', async () => {
    const ctx = { targetingKey: 'user-1' };
    await nginx.admin(ng.base, 'PUT', 'overrides/shop/on', { enabled: false });
    assert.deepEqual(pick(await client.getBooleanDetails('on', true, ctx)),
                     { value: false, reason: 'DISABLED', variant: 'off',
                       flagMetadata: { rolloutPercentage: 0, rolledBack: false } });
    await nginx.admin(ng.base, 'PUT', 'overrides/shop/on', { rolloutPercentage: 0 });
    assert.deepEqual(pick(await client.getBooleanDetails('on', true, ctx)),
                     { value: false, reason: 'STATIC', variant: 'off',
                       flagMetadata: { rolloutPercentage: 0, rolledBack: false } });
    await nginx.admin(ng.base, 'DELETE', 'overrides/shop/on');
    assert.deepEqual(pick(await client.getBooleanDetails('on', false, ctx)),
                     { value: true, reason: 'STATIC', variant: 'on',
                       flagMetadata: { rolloutPercentage: 100, rolledBack: false } });
});

test('each provider evaluation is counted once, as a GET /flags evaluation is', async () => {
    const status = async () => {
        const res = await fetch(`${ng.base}/flags-status`);
        const body = await res.json();
        return body.projects[0].flags.find((f) => f.name === 'zero').counters;
    };
    const before = await status();
    for (let i = 0; i < 5; i++) {
        assert.equal(await client.getBooleanValue('zero', true, { targetingKey: `u${i}` }), false);
    }
    await nginx.getFlags(ng.base, TOKEN, 'u9');
    const now = await status();
    assert.deepEqual(now, { evaluations: before.evaluations + 6,
                            enabledEvaluations: before.enabledEvaluations,
                            errors: before.errors });
});
