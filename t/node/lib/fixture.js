'use strict';
// The flags file and the nginx configuration every Node client test uses:
// one project "shop" (token pub_shop_1), OFREP at /ofrep/ (the providers
// call <baseUrl>/ofrep/v1/...), GET /flags to compare with, the error
// ingest and flags_admin to drive rollbacks, flags_status to read counters.

const TOKEN = 'pub_shop_1';

const SHOP = {
    flags: [
        { name: 'on', enabled: true, rolloutPercentage: 100 },
        { name: 'zero', enabled: true, rolloutPercentage: 0 },
        { name: 'killed', enabled: false, rolloutPercentage: 100 },
        { name: 'half', enabled: true, rolloutPercentage: 50 },
        { name: 'fine', enabled: true, rolloutPercentage: 12.345 },
        { name: 'pro-only', enabled: true, rolloutPercentage: 100, segments: ['pro'] },
        { name: 'pro-half', enabled: true, rolloutPercentage: 50, segments: ['pro'] },
        { name: 'heavy', enabled: true, rolloutPercentage: 100, segments: ['heavy'] },
        { name: 'testers', enabled: true, rolloutPercentage: 100, segments: ['testers'] },
        { name: 'by-account', enabled: true, rolloutPercentage: 50, stickiness: 'accountId' },
        { name: 'risky', enabled: true, rolloutPercentage: 100,
          rollback: { minErrors: 3, rate: 1, window: 60 } },
    ],
    segments: {
        pro: { rules: [{ trait: 'plan', op: 'eq', value: 'pro' }] },
        heavy: { rules: [{ trait: 'sessions', op: 'eq', value: '42' }] },
        testers: { rules: [{ trait: 'beta', op: 'eq', value: 'true' }] },
    },
};

const HTTP = `
    flags_project shop token=${TOKEN} file=shop.json;
    flags_error_log logs/reports.log;
`;

const SERVER = `
        location = /flags { flags_evaluate; }
        location /ofrep/ { flags_ofrep; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; allow 127.0.0.1; deny all; }
        location /flags-admin/ { flags_admin; allow 127.0.0.1; deny all; }
`;

const NGINX = { flags: { 'shop.json': SHOP }, http: HTTP, server: SERVER };

const FLAG_NAMES = SHOP.flags.map((f) => f.name);
const HAS_SEGMENTS = new Set(SHOP.flags.filter((f) => f.segments).map((f) => f.name));

module.exports = { TOKEN, SHOP, NGINX, FLAG_NAMES, HAS_SEGMENTS };
