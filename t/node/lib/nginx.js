'use strict';
// One nginx per test file for the Node client tests (./build.sh node).
//
// start() writes a prefix directory under the system temp dir (conf/ with
// nginx.conf and the flags files, logs/), picks a free port on 127.0.0.1
// and starts nginx with two workers through t/helper/nginxctl, the one CLI
// that starts and stops nginx for the tests and benches. stop() ends that
// nginx by its master's PID (nginxctl stop) and nothing else.
//
// Environment (set by build.sh): NGINX_BIN (default /usr/sbin/nginx),
// TEST_NGINX_LOAD_MODULES (default <repo>/build/ngx_http_flags_module.so),
// FLAGS_NGINX_PRELOAD (an LD_PRELOAD for nginx only: the sanitizer runtime),
// FLAGS_NODE_KEEP=1 keeps the prefix directories.

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const NGINXCTL = path.join(ROOT, 't', 'helper', 'nginxctl');
const BIN = process.env.NGINX_BIN || '/usr/sbin/nginx';
const MODULE = process.env.TEST_NGINX_LOAD_MODULES
    || path.join(ROOT, 'build', 'ngx_http_flags_module.so');

// The access log line of every request: what the server answered and which
// tag the client sent, so a test can see a 304 from the server's side.
// escape=none: tags are logged with their quotes, an absent header as
// nothing ("inm= etag=...").
const LOG_FORMAT = "'$request_method $request_uri $status "
    + 'inm=$http_if_none_match etag=$sent_http_etag\'';

function freePort() {
    return new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.unref();
        srv.on('error', reject);
        srv.listen(0, '127.0.0.1', () => {
            const { port } = srv.address();
            srv.close(() => resolve(port));
        });
    });
}

function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

// Polls cond() (sync or async) until it returns a truthy value, which is
// returned; throws after timeoutMs with what.
async function waitFor(cond, timeoutMs, what) {
    const until = Date.now() + timeoutMs;
    for (;;) {
        const r = await cond();
        if (r) {
            return r;
        }
        if (Date.now() >= until) {
            throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
        }
        await sleep(20);
    }
}

// What a test's http and server text leave unset stays under the prefix,
// never in the system's paths: the report log (without flags_error_log it
// is the default beside nginx's compiled-in access log, on Debian
// /var/log/nginx/flags-errors.log) and the temp directories (nginx creates
// its compiled-in /var/lib/nginx/body and the like at every start). These
// lines come last in the http block.
function ownPaths(text) {
    let own = '';
    if (!/\bflags_error_log\b/.test(text)) {
        own += '    flags_error_log logs/flags-errors.log;\n';
    }
    for (const kind of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) {
        if (!new RegExp(`\\b${kind}_temp_path\\b`).test(text)) {
            own += `    ${kind}_temp_path ${kind}_temp;\n`;
        }
    }
    return own;
}

function nginxConf(port, http, server) {
    const user = process.getuid && process.getuid() === 0 ? 'user root;\n' : '';
    return `load_module ${MODULE};
${user}worker_processes 2;
master_process on;
daemon on;
error_log logs/error.log info;
pid logs/nginx.pid;
events { worker_connections 256; accept_mutex off; }
http {
    log_format flags escape=none ${LOG_FORMAT};
    access_log off;
${http}
    server {
        listen 127.0.0.1:${port};
        server_name localhost;
        access_log logs/access.log flags;
${server}
    }
${ownPaths(http + server)}}
`;
}

// start({ flags: { 'shop.json': {...} }, files: { 'htpasswd': '...' },
// http: '...', server: '...' }): flags files (JSON) and other files (text)
// go to conf/ (name them relative to it in flags_project and the like).
async function start({ flags = {}, files = {}, http = '', server = '' }) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-node-'));
    fs.mkdirSync(path.join(dir, 'conf'));
    fs.mkdirSync(path.join(dir, 'logs'));
    for (const [name, def] of Object.entries(flags)) {
        fs.writeFileSync(path.join(dir, 'conf', name), JSON.stringify(def, null, 1));
    }
    for (const [name, text] of Object.entries(files)) {
        fs.writeFileSync(path.join(dir, 'conf', name), text);
    }
    const port = await freePort();
    fs.writeFileSync(path.join(dir, 'conf', 'nginx.conf'), nginxConf(port, http, server));
    const env = { ...process.env };
    if (process.env.FLAGS_NGINX_PRELOAD) {
        env.LD_PRELOAD = process.env.FLAGS_NGINX_PRELOAD;
    }
    const out = execFileSync(NGINXCTL, ['start', dir, String(port), '--bin', BIN],
                             { encoding: 'utf8', env });
    const pid = Number(out.trim());
    if (!Number.isInteger(pid) || pid <= 0) {
        throw new Error(`nginxctl start printed no PID: ${out}`);
    }
    const base = `http://127.0.0.1:${port}`;
    const read = (name) => {
        try {
            return fs.readFileSync(path.join(dir, 'logs', name), 'utf8');
        } catch {
            return '';
        }
    };
    let stopped = false;
    return {
        dir,
        port,
        pid,
        base,
        // the access log's lines (format above)
        accessLog: () => read('access.log').split('\n').filter((l) => l !== ''),
        errorLog: () => read('error.log'),
        // ends this nginx (by PID); returns its error log's [alert], [crit]
        // and [emerg] lines, which a test asserts empty
        stop() {
            if (stopped) {
                return [];
            }
            stopped = true;
            execFileSync(NGINXCTL, ['stop', String(pid)]);
            const bad = read('error.log').split('\n')
                .filter((l) => /\[(alert|crit|emerg)\]/.test(l));
            if (!process.env.FLAGS_NODE_KEEP) {
                fs.rmSync(dir, { recursive: true, force: true });
            }
            return bad;
        },
    };
}

// GET /flags for a user and traits, as the module's own API answers it:
// { name: { enabled, rolloutPercentage, segments } }.
async function getFlags(base, token, userId, traits = {}) {
    const q = new URLSearchParams();
    if (userId !== undefined) {
        q.set('userId', userId);
    }
    for (const [k, v] of Object.entries(traits)) {
        q.set(`trait_${k}`, String(v));
    }
    const res = await fetch(`${base}/flags?${q}`, {
        headers: { Authorization: `Bearer ${token}` },
    });
    if (res.status !== 200) {
        throw new Error(`GET /flags answered ${res.status}: ${await res.text()}`);
    }
    const body = await res.json();
    return Object.fromEntries(body.flags.map((f) => [f.name, f]));
}

// POST /ingest/errors for a flag, n times; every answer must be a 204.
async function reportErrors(base, token, flagName, n) {
    for (let i = 0; i < n; i++) {
        const res = await fetch(`${base}/ingest/errors`, {
            method: 'POST',
            headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
            body: JSON.stringify({ flagName, message: `TypeError: report ${i}` }),
        });
        await res.arrayBuffer();
        if (res.status !== 204) {
            throw new Error(`POST /ingest/errors answered ${res.status}`);
        }
    }
}

// One flags_admin call (DELETE or PUT); must answer 204.
async function admin(base, method, what, body) {
    const res = await fetch(`${base}/flags-admin/${what}`, {
        method,
        headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
    });
    await res.arrayBuffer();
    if (res.status !== 204) {
        throw new Error(`${method} /flags-admin/${what} answered ${res.status}`);
    }
}

// A fetch that records every request's If-None-Match and its answer's status
// and ETag, for a provider's fetchImplementation.
function recordingFetch() {
    const calls = [];
    const f = async (input, init) => {
        const req = new Request(input, init);
        const res = await fetch(req);
        calls.push({
            method: req.method,
            url: req.url,
            ifNoneMatch: req.headers.get('if-none-match'),
            status: res.status,
            etag: res.headers.get('etag'),
        });
        return res;
    };
    f.calls = calls;
    return f;
}

module.exports = {
    start, getFlags, reportErrors, admin, recordingFetch, waitFor, sleep, freePort,
};
