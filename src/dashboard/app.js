// The operator's page of ngx_http_flags_module (docs/dashboard.md).
//
// Reads config.json once, then status.json (the flags_status document)
// on every "changed" event of the event stream (debounced) and every 5 s
// while the page is visible, for the charts. Every card is built once per
// flag and updated in place. Data reaches the page only through
// textContent and attributes: nothing from the server is parsed as HTML.
'use strict';

(function () {
    const POLL_MS = 5000;
    const DEBOUNCE_MS = 100;
    const HISTORY_MS = 5 * 60 * 1000;
    const HISTORY_S = HISTORY_MS / 1000;
    const CHART_W = 120;
    const CHART_H = 32;
    const SVG = 'http://www.w3.org/2000/svg';

    const $ = (id) => document.getElementById(id);
    const cfg = { admin: null, status: 'status.json', events: 'events' };
    const projects = new Map();   // name -> { el, cards, count, flags: Map }
    const events = new Map();     // 'seq at' -> li
    let order = '';               // the flags' keys in the document's order
    let timer = 0;
    let debounce = 0;
    let busy = false;
    let again = false;
    let lastOk = 0;
    let lastErr = '';             // why the last reading failed ('' if it did not)
    let lastDoc = {};             // the last status.json read
    let source = null;
    let pending = null;           // the action the dialog asks about
    let opener = null;            // the button that opened the dialog

    // ---- small DOM helpers: text only, never HTML ----

    function el(tag, cls, text) {
        const e = document.createElement(tag);
        if (cls) {
            e.className = cls;
        }
        if (text !== undefined) {
            e.textContent = text;
        }
        return e;
    }

    function svg(tag, attrs) {
        const e = document.createElementNS(SVG, tag);
        for (const k in attrs) {
            e.setAttribute(k, attrs[k]);
        }
        return e;
    }

    // sets a node's text (and its title, for text cut by an ellipsis) only
    // when it changed, so an unchanged card costs no layout
    function put(node, text, title) {
        if (node.textContent !== text) {
            node.textContent = text;
        }
        const t = title === undefined ? text : title;
        if (node.title !== t) {
            node.title = t;
        }
    }

    function setClass(node, cls) {
        if (node.className !== cls) {
            node.className = cls;
        }
    }

    // ---- formatting ----

    // one formatter a precision: toLocaleString builds one a call, which
    // costs more than the rest of a card's update
    const formats = [];

    function num(n, digits) {
        if (n === null || n === undefined || Number.isNaN(n)) {
            return '–';
        }
        const d = digits === undefined ? 3 : digits;
        if (!formats[d]) {
            formats[d] = new Intl.NumberFormat(undefined, { maximumFractionDigits: d });
        }
        return formats[d].format(n);
    }

    function pct(n) {
        return n === null || n === undefined ? '–' : num(n) + ' %';
    }

    function pad(n) {
        return String(n).padStart(2, '0');
    }

    // every time on the page: date, time and zone, in UTC (the zone of
    // flags_status's times), whatever the browser's zone is
    function clock(iso) {
        const d = new Date(iso);
        if (!iso || Number.isNaN(d.getTime())) {
            return '–';
        }
        return d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate()) + ' ' +
            pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + ':' + pad(d.getUTCSeconds()) + ' UTC';
    }

    function ago(iso) {
        const d = new Date(iso);
        if (!iso || Number.isNaN(d.getTime())) {
            return '';
        }
        const s = Math.round((Date.now() - d.getTime()) / 1000);
        if (s < 0) {
            return 'in ' + span(-s);
        }
        return span(s) + ' ago';
    }

    function span(s) {
        if (s < 90) {
            return s + ' s';
        }
        if (s < 5400) {
            return Math.round(s / 60) + ' min';
        }
        if (s < 172800) {
            return Math.round(s / 3600) + ' h';
        }
        return Math.round(s / 86400) + ' d';
    }

    function when(iso) {
        if (!iso) {
            return '–';
        }
        if (Number.isNaN(new Date(iso).getTime())) {
            return String(iso);
        }
        return clock(iso) + ' (' + ago(iso) + ')';
    }

    function plural(n, one, many) {
        return num(n, 0) + ' ' + (n === 1 ? one : many);
    }

    // ---- what a flag is ----

    function killed(f) {
        return f.enabled === false || (f.override !== null && f.override !== undefined && f.override.enabled === false);
    }

    // a ramp that moves or may move again: not finished, not rolled back
    function ramping(f) {
        return !!f.ramp && !f.rolledBack && f.ramp.state !== 'done' && f.ramp.state !== 'rolledBack';
    }

    // the one state a card's colour and badge show, the worst first
    function stateOf(f) {
        if (f.rolledBack) {
            return ['rolledBack', 'rolled back'];
        }
        if (killed(f)) {
            return ['killed', f.enabled === false ? 'off in file' : 'killed'];
        }
        if (f.override) {
            return ['overridden', 'overridden'];
        }
        if (ramping(f)) {
            return ['ramping', 'ramp ' + f.ramp.state];
        }
        // a flag with rules or named users is on (off) for everyone only
        // when every rule, the fallthrough and the named users say so
        const rules = Array.isArray(f.rules) ? f.rules : [];
        const t = f.targets || {};
        const all = (p) => rules.every((r) => r && p(r.rolloutPercentage)) && p(f.effectiveRolloutPercentage);
        if (!t.off && all((p) => p >= 100)) {
            return ['on', 'on'];
        }
        if (!t.on && all((p) => p <= 0)) {
            return ['off', 'off'];
        }
        return ['partial', 'partial'];
    }

    function matches(f, state) {
        switch (state) {
        case 'rolledBack': return !!f.rolledBack;
        case 'overridden': return !!f.override;
        case 'ramping': return ramping(f);
        case 'killed': return killed(f);
        default: return true;
        }
    }

    function overrideText(o) {
        if (!o) {
            return 'none';
        }
        if (o.enabled === false) {
            return 'kill switch (off for everyone)';
        }
        if (o.rolloutPercentage !== undefined) {
            return num(o.rolloutPercentage) + ' % for everyone in the split';
        }
        return JSON.stringify(o);
    }

    // one cohort: its errors over its evaluations (counts, or the change
    // between two readings)
    function cohortText(evals, errors) {
        if (!evals) {
            return 'no evaluation' + (errors ? ', ' + plural(errors, 'error', 'errors') : '');
        }
        // (a report needs no evaluation on this host: errors may exceed them)
        return pct(Math.floor(Math.min(errors, evals) * 100000 / evals) / 1000) + ' (' +
            plural(errors, 'error', 'errors') + ' / ' + plural(evals, 'eval', 'evals') + ')';
    }

    function rollbackText(f) {
        const r = f.rollback;
        if (r) {
            const who = r.decidedBy === 'fleet' ? 'by the fleet'
                : r.decidedBy === 'rule' ? 'by the rule' : 'restored';
            const d = f.ramp && f.ramp.decision;
            if (d && d.cause === 'regression') {
                /* the deciding tick's cohorts sit beside its number */
                const on = d.on || {};
                const off = d.off || {};
                return clock(r.at) + ' ' + who + ': the ramp found the on cohort failing more (deciding tick: on ' +
                    num(on.errors, 0) + ' errors in ' + num(on.requests, 0) + ', off ' + num(off.errors, 0) +
                    ' in ' + num(off.requests, 0) + ')';
            }
            if (d && d.cause === 'insufficientRequests') {
                return clock(r.at) + ' ' + who + ': the ramp\'s stage saw too few requests';
            }
            return clock(r.at) + ' ' + who + ': ' + plural(r.errors, 'error', 'errors') + ' in ' +
                plural(r.enabledEvaluations, 'on evaluation', 'on evaluations') + ', ' +
                plural(r.sources, 'source', 'sources');
        }
        const rule = f.rollbackRule;
        if (!rule || rule.enabled === false) {
            return 'no: automatic rollback is off';
        }
        if (f.zoneFull) {
            return 'no: not counted (zone full)';
        }
        const w = rule.waitingFor;
        if (!w) {
            return 'no';
        }
        // it trips once the window has both: errors enough (for the count and
        // for the rate) and distinct sources enough
        const e = Math.max(w.errors || 0, w.rateErrors || 0);
        return 'no · trips after ' + (e ? plural(e, 'more error', 'more errors') : 'the next error') +
            (w.sources ? ' from ' + plural(w.sources, 'more source', 'more sources') : '');
    }

    function rampText(r) {
        if (!r) {
            return ['', 'none'];
        }
        let head = 'stage ' + r.stage + ' of ' + r.stages + ' (' + num(r.percentage) + ' %), ' +
            (r.state === 'rolledBack' ? 'rolled back' : r.state);
        if (r.stalled) {
            head += ', stalled';
        }
        const w = r.waitingFor;
        const parts = [];
        if (w && w.startAt) {
            parts.push('starts ' + when(r.startAt));
        } else if (w) {
            if (w.resume) {
                parts.push('waits for a resume');
            }
            if (w.holdSeconds) {
                parts.push('hold ' + span(w.holdSeconds) + ' more');
            }
            if (w.requests) {
                parts.push(plural(w.requests, 'on request', 'on requests') + ' more');
            }
        }
        if (r.nextStageAt) {
            parts.push('next stage ≥ ' + clock(r.nextStageAt));
        }
        const e = r.evidence;
        if (e) {
            parts.push('evidence ' + num(e.statistic, 2) + ' of ' + num(e.bound, 0) + ' after ' +
                plural(e.ticks, 'tick', 'ticks') + ' (errors on ' + num(e.errors && e.errors.on, 0) +
                ', off ' + num(e.errors && e.errors.off, 0) + ')');
        }
        return [head, parts.join('; ') || '–'];
    }

    // ---- the chart: errors second by second, the last 5 minutes ----
    //
    // Each reading carries the window's last seconds one by one
    // (window.perSecond: [seconds ago, on evaluations, errors]), so the
    // first reading already draws the last minute; the page keeps what it
    // read for 5 minutes. A second the window covers and does not list had
    // no error (or was emptied by a clear).

    // Each card keeps a ring of HISTORY_S seconds: its second (0: none)
    // and its errors. The chart is drawn only for a card on the screen
    // (an IntersectionObserver): with 1,000 flags a reading merges every
    // card's seconds but draws a few.
    function sample(card, f, now) {
        const w = f.window;
        const nowS = Math.floor(now / 1000);
        const at = card.at;
        const n = card.n;
        if (w && Array.isArray(w.perSecond)) {
            // a second's count only grows, but a cleared rollback empties
            // the window: the page keeps the larger, so the incident stays
            const len = Math.min(w.seconds || 0, 60);
            for (let a = 0; a < len; a++) {
                const t = nowS - a;
                const i = t % HISTORY_S;
                if (at[i] !== t) {
                    at[i] = t;
                    n[i] = 0;
                }
            }
            for (const p of w.perSecond) {
                if (Array.isArray(p) && p[0] < len) {
                    const i = (nowS - p[0]) % HISTORY_S;
                    n[i] = Math.max(n[i], p[2] || 0);
                }
            }
        }
        card.nowS = nowS;
        card.dirty = true;
        if (card.onScreen) {
            draw(card);
        }
        put(card.window, w ? plural(w.errors, 'error', 'errors') + ', ' + num(w.enabledEvaluations, 0) +
            ' on evals, ' + plural(w.sources, 'source', 'sources') + ' / ' + w.seconds + ' s' : '–',
            w ? 'the last ' + w.seconds + ' s: ' + plural(w.errors, 'error', 'errors') + ' from ' +
            plural(w.sources, 'source', 'sources') + ' in ' +
            plural(w.enabledEvaluations, 'on evaluation', 'on evaluations') : '');
    }

    function draw(card) {
        if (!card.dirty || !card.flag) {
            return;
        }
        card.dirty = false;
        const w = card.flag.window;
        const nowS = card.nowS;
        const at = card.at;
        const n = card.n;
        let max = 0;
        let oldest = nowS;
        for (let i = 0; i < HISTORY_S; i++) {
            if (at[i] > nowS - HISTORY_S) {
                oldest = Math.min(oldest, at[i]);
                max = Math.max(max, n[i]);
            }
        }
        const top = max > 0 ? max * 1.15 : 1;
        const bw = CHART_W / HISTORY_S;
        let d = '';
        for (let i = 0; i < HISTORY_S; i++) {
            if (n[i] > 0 && at[i] > nowS - HISTORY_S) {
                const x = CHART_W - (nowS - at[i] + 1) * bw;
                const h = Math.max(1, (n[i] / top) * (CHART_H - 3));
                d += 'M' + x.toFixed(1) + ' ' + (CHART_H - 1) + 'v-' + h.toFixed(1) + 'h' +
                    Math.max(bw, 0.8).toFixed(1) + 'v' + h.toFixed(1) + 'Z';
            }
        }
        if (d !== card.path) {
            card.path = d;
            card.area.setAttribute('d', d);
        }
        const errs = w ? w.errors : 0;
        const label = (w ? plural(errs, 'error', 'errors') + ' in the window (' + w.seconds + ' s)' : 'no window') +
            '; at most ' + plural(max, 'error', 'errors') + ' in one second over the last ' +
            span(nowS - oldest + 1);
        put(card.chartNow, (w ? num(errs, 0) + ' in ' + w.seconds + ' s' : '–') +
            (max > 0 ? ' · max ' + num(max, 0) + '/s' : ''), '');
        if (card.chart.getAttribute('aria-label') !== label) {
            card.chart.setAttribute('aria-label', label);
            card.chartTitle.textContent = label;
        }
    }

    const seen = typeof IntersectionObserver === 'function' ? new IntersectionObserver((list) => {
        for (const e of list) {
            const c = e.target.card;
            c.onScreen = e.isIntersecting;
            if (c.onScreen) {
                draw(c);
            }
        }
    }) : null;

    // ---- the cohorts: the change since a reading a window ago ----
    //
    // flags_status's cohorts count since the flag's counters began, so an
    // incident fixed an hour ago still weighs in them. The card shows the
    // change over the last window (from the newest kept reading at least a
    // window old, else the oldest), and the totals, marked so, only until
    // it has two readings. Only the recent rates are marked red.

    function cohorts(card, f, now) {
        const co = f.cohorts || {};
        const on = co.on || {};
        const off = co.off || {};
        const cur = [now, on.evaluations || 0, on.errors || 0, off.evaluations || 0, off.errors || 0];
        const rs = card.readings;
        const last = rs[rs.length - 1];
        // counters that went down: a restart or a new definition
        if (last && cur.some((v, i) => i > 0 && v < last[i])) {
            rs.length = 0;
        }
        // (a window longer than 5 minutes: the last 5 minutes)
        const win = Math.min(HISTORY_MS, Math.max(1, (f.window && f.window.seconds) || 60) * 1000);
        let base = null;
        for (const r of rs) {
            if (now - r[0] >= win || !base) {
                base = r;
            }
        }
        rs.push(cur);
        // the oldest is needed only while the next one is less than a window old
        while (rs.length > 2 && now - rs[1][0] >= win) {
            rs.shift();
        }
        let d = cur;
        let over = 'in total (no earlier reading)';
        if (base) {
            d = cur.map((v, i) => v - base[i]);
            over = 'last ' + span(Math.round(d[0] / 1000));
        }
        const onT = cohortText(d[1], d[2]);
        const offT = cohortText(d[3], d[4]);
        put(card.on, onT, '');
        put(card.off, offT, '');
        put(card.coWhen, over, '');
        card.cohorts.title = (base ? 'over the ' + over : 'since the counters began') +
            ': errors of the users the flag is on for: ' + onT + '; off for: ' + offT;
        const worse = base && d[1] > 0 && d[3] > 0 && d[2] * d[3] > d[4] * d[1];
        setClass(card.on, worse ? 'worse' : '');
    }

    function targeting(f) {
        const s = Array.isArray(f.segments) ? f.segments : [];
        if (!s.length) {
            return 'everyone (no segment)';
        }
        return (s.length === 1 ? 'segment ' : 'one of the segments ') + s.join(', ');
    }

    // A flag with targeting (issue 26): flags_status's "rules" (each rule's
    // segments and percentage) and "targets" (how many named users, never
    // who), read in the order the server decides: the named users, the
    // rules, first match first, then the fallthrough, the one percentage a
    // ramp's stage replaces. Lines of text, or null for a flag with neither
    // (its card says what it said before).
    function ruleSegments(list) {
        const s = Array.isArray(list) ? list.map(String) : [];
        if (!s.length) {
            return 'everyone';
        }
        return (s.length === 1 ? 'segment ' : 'one of the segments ') + s.join(', ');
    }

    function targetingLines(f) {
        const rules = Array.isArray(f.rules) ? f.rules : null;
        const t = f.targets && typeof f.targets === 'object' ? f.targets : null;
        if (!rules && !t) {
            return null;
        }
        const lines = [];
        if (t) {
            lines.push(['named users: ' + num(t.on || 0, 0) + ' on, ' + num(t.off || 0, 0) + ' off', '']);
        }
        if (rules) {
            rules.forEach((r, k) => {
                lines.push(['rule ' + k + ': ' + ruleSegments(r && r.segments) + ' → ' + pct(r && r.rolloutPercentage), '']);
            });
            // the stage of a ramp that has started and is not rolled back is
            // the fallthrough's percentage; the rules keep theirs
            const r = f.ramp;
            const staged = r && r.state !== 'rolledBack' && !(r.waitingFor && r.waitingFor.startAt);
            lines.push(staged
                ? ['fallthrough: ' + pct(r.percentage) + ', ramp stage ' + r.stage + ' (replaces the fallthrough\'s ' +
                   pct(f.rolloutPercentage) + '; the rules keep theirs)', '']
                : ['fallthrough: ' + pct(f.rolloutPercentage), '']);
        } else {
            lines.push(['everyone else: ' + targeting(f), '']);
        }
        // what wins over all of the above (evaluation's first two steps)
        const o = f.override;
        if (f.rolledBack) {
            lines.push(['rolled back: off for everyone, named users too', 'warn']);
        } else if (f.enabled === false || (o && o.enabled === false)) {
            lines.push(['off for everyone, named users too', 'warn']);
        } else if (o && o.rolloutPercentage !== undefined) {
            lines.push(['override ' + pct(o.rolloutPercentage) + ' replaces every percentage' +
                (rules ? ', the rules\' too' : '') + (t ? '; named users set aside' : ''), 'warn']);
        }
        return lines;
    }

    function putTargeting(c, f) {
        const lines = targetingLines(f);
        if (!lines) {
            if (c.targetKey) {
                c.target.replaceChildren();
            }
            c.targetKey = '';
            put(c.target, targeting(f));
            return;
        }
        const key = JSON.stringify(lines);
        if (key === c.targetKey) {
            return;
        }
        c.targetKey = key;
        const ul = el('ul', 'tgt');
        for (const [text, cls] of lines) {
            ul.appendChild(el('li', cls, text));
        }
        c.target.replaceChildren(ul);
        c.target.title = lines.map((l) => l[0]).join('; ');
    }

    function sources(f) {
        const b = f.errorsBySource;
        if (!b) {
            return '–';
        }
        // counters.errors by source: the on cohort's, since the counters began
        return plural(b.reports, 'report', 'reports') + ' · ' + num(b.upstream, 0) + ' upstream 5xx (total)';
    }

    function row(dl, term) {
        dl.appendChild(el('dt', '', term));
        const dd = el('dd');
        dl.appendChild(dd);
        return dd;
    }

    function button(box, label, action, aria) {
        const b = el('button', '', label);
        b.type = 'button';
        b.dataset.action = action;
        b.setAttribute('aria-label', aria);
        box.appendChild(b);
        return b;
    }

    function makeCard(pname, fname) {
        const id = pname + '/' + fname;
        const c = { project: pname, name: fname, at: new Float64Array(HISTORY_S), n: new Float64Array(HISTORY_S),
                    nowS: 0, dirty: false, onScreen: !seen, readings: [], flag: null };
        c.el = el('article', 'flag');
        c.el.setAttribute('aria-label', 'flag ' + fname + ' of project ' + pname);
        c.el.dataset.project = pname;
        c.el.dataset.flag = fname;
        c.el.card = c;
        if (seen) {
            seen.observe(c.el);
        }
        const head = el('div', 'head');
        c.title = el('h3', '', fname);
        c.title.title = id;
        c.badge = el('span', 'badge');
        c.full = el('span', 'badge full', 'zone full');
        c.full.title = 'no room in the zone: evaluated, but not counted and never rolled back';
        c.full.hidden = true;
        head.append(c.title, c.full, c.badge);
        c.el.appendChild(head);

        const dl = el('dl');
        c.served = row(dl, 'Served');
        c.servedPct = el('span', 'pct num');
        c.servedOf = el('span', 'muted');
        c.served.append(c.servedPct, ' ', c.servedOf);
        c.override = row(dl, 'Override');
        c.chartCell = row(dl, 'Errors/s');
        c.chartCell.className = 'chartcell';
        c.chart = svg('svg', { class: 'chart', viewBox: '0 0 ' + CHART_W + ' ' + CHART_H,
                               preserveAspectRatio: 'none', role: 'img', focusable: 'false' });
        c.chartTitle = svg('title', {});
        c.area = svg('path', { class: 'area' });
        c.chart.append(c.chartTitle,
                       svg('line', { class: 'base', x1: 0, x2: CHART_W, y1: CHART_H - 0.5, y2: CHART_H - 0.5 }),
                       c.area);
        c.chartNow = el('span', 'chartnow num');
        c.chartCell.append(c.chart, c.chartNow);
        c.window = row(dl, 'Window');
        c.sources = row(dl, 'Errors');
        c.cohorts = row(dl, 'Cohorts');
        c.cohorts.className = 'two';
        c.on = el('span');
        c.off = el('span');
        c.coWhen = el('span', 'muted');
        c.cohorts.append('on ', c.on, ' · off ', c.off, ' · ', c.coWhen);
        c.target = row(dl, 'Targeting');
        c.target.className = 'two';
        c.targetKey = null;
        c.rollback = row(dl, 'Rolled back');
        c.rollback.className = 'two';
        c.ramp = row(dl, 'Ramp');
        c.ramp.className = 'two';
        c.rampHead = el('span', 'rampHead');
        c.rampMore = el('span', 'muted');
        c.ramp.append(c.rampHead, ' ', c.rampMore);
        c.defined = row(dl, 'Defined');
        c.el.appendChild(dl);

        if (cfg.admin !== null) {
            const box = el('div', 'actions');
            box.setAttribute('role', 'group');
            box.setAttribute('aria-label', 'actions on ' + id);
            c.bClear = button(box, 'Clear rollback', 'clear', 'Clear the rollback of ' + id);
            c.bKill = button(box, 'Kill', 'kill', 'Kill ' + id + ' (override: off)');
            c.bSet = button(box, 'Set %…', 'set', 'Set an override percentage for ' + id);
            c.bRemove = button(box, 'Remove override', 'remove', 'Remove the override of ' + id);
            c.bPause = button(box, 'Pause ramp', 'pause', 'Pause the ramp of ' + id);
            c.bResume = button(box, 'Resume ramp', 'resume', 'Resume the ramp of ' + id);
            // only in a project whose definitions change at runtime (render)
            c.bEdit = button(box, 'Edit…', 'edit', 'Edit the definition of ' + id);
            c.bEdit.hidden = true;
            c.el.appendChild(box);
        }
        return c;
    }

    function disable(b, off) {
        if (b.disabled !== off) {
            b.disabled = off;
        }
    }

    function updateCard(c, f, now) {
        c.flag = f;
        const st = stateOf(f);
        c.state = st[0];
        setClass(c.el, 'flag s-' + st[0]);
        setClass(c.badge, 'badge s-' + st[0]);
        put(c.badge, st[1]);
        c.full.hidden = !f.zoneFull;

        put(c.servedPct, pct(killed(f) ? 0 : f.effectiveRolloutPercentage));
        // with rules, the one percentage flags_status serves is the fallthrough's
        const fall = Array.isArray(f.rules) && !f.override && !f.rolledBack && f.enabled !== false;
        put(c.servedOf, (fall ? 'fallthrough, ' : '') + 'configured ' + pct(f.rolloutPercentage) +
            (f.enabled === false ? ', off in the file' : ''));
        put(c.override, overrideText(f.override));
        sample(c, f, now);
        put(c.sources, sources(f), 'the on cohort\'s errors since the counters began, by where they came from: ' +
            'error reports, or 5xx answers of requests that read the flag (flags_upstream_errors)');
        cohorts(c, f, now);
        putTargeting(c, f);
        put(c.rollback, rollbackText(f));
        setClass(c.rollback, f.rolledBack ? 'two bad' : 'two');
        const r = rampText(f.ramp);
        put(c.rampHead, r[0], '');
        put(c.rampMore, r[0] && r[1] ? '· ' + r[1] : r[1], '');
        c.ramp.title = r[0] ? r[0] + '; ' + r[1] : r[1];
        put(c.defined, f.definedAt ? when(f.definedAt) : '–', f.definedAt || 'not reported by this nginx');

        if (c.bClear) {
            disable(c.bClear, !f.rolledBack);
            disable(c.bKill, !!(f.override && f.override.enabled === false));
            disable(c.bRemove, !f.override);
            const s = f.ramp ? f.ramp.state : '';
            c.bPause.hidden = !f.ramp;
            c.bResume.hidden = !f.ramp;
            disable(c.bPause, s !== 'running' && s !== 'holding');
            disable(c.bResume, s !== 'paused');
        }
    }

    // ---- the whole document ----

    function project(name) {
        let p = projects.get(name);
        if (p) {
            return p;
        }
        p = { flags: new Map() };
        p.el = el('section', 'project');
        p.el.setAttribute('aria-label', 'project ' + name);
        const h = el('h2');
        h.append(el('span', '', name));
        p.count = el('span', 'muted num');
        h.append(p.count);
        p.el.dataset.project = name;
        // where its definitions come from: a file, or versions changed at runtime
        p.defs = el('p', 'defs');
        p.defsText = el('span', 'muted');
        p.defs.append(p.defsText);
        if (cfg.admin !== null) {
            p.bHistory = button(p.defs, 'History…', 'history', 'History of the definitions of ' + name);
            p.bHistory.hidden = true;
        }
        p.cards = el('div', 'cards');
        p.el.append(h, p.defs, p.cards);
        projects.set(name, p);
        const opt = el('option', '', name);
        opt.value = name;
        $('f-project').appendChild(opt);
        p.option = opt;
        return p;
    }

    function render(doc) {
        const now = Date.now();
        const seen = new Set();
        const keys = [];
        let total = 0;
        let rolled = 0;
        let over = 0;
        let ramps = 0;
        for (const pj of doc.projects || []) {
            const p = project(pj.name);
            seen.add(pj.name);
            const names = new Set();
            let pr = 0;
            const d = pj.definitions;
            const runtime = !!d && d.source === 'runtime';
            p.runtime = runtime;
            put(p.defsText, !d ? '' : runtime ? 'Definitions: version ' + d.version + ' of ' + clock(d.at) +
                ', changed at runtime' : 'Definitions in file: edit the file and reload nginx', d ? d.at || '' : '');
            if (p.bHistory && p.bHistory.hidden === runtime) {
                p.bHistory.hidden = !runtime;
            }
            for (const f of pj.flags || []) {
                names.add(f.name);
                let c = p.flags.get(f.name);
                if (!c) {
                    c = makeCard(pj.name, f.name);
                    p.flags.set(f.name, c);
                }
                updateCard(c, f, now);
                if (c.bEdit && c.bEdit.hidden === runtime) {
                    c.bEdit.hidden = !runtime;
                }
                keys.push(pj.name + '\n' + f.name);
                total++;
                rolled += f.rolledBack ? 1 : 0;
                pr += f.rolledBack ? 1 : 0;
                over += f.override ? 1 : 0;
                ramps += ramping(f) ? 1 : 0;
            }
            for (const [n, c] of p.flags) {
                if (!names.has(n)) {
                    c.el.remove();
                    if (seen) {
                        seen.unobserve(c.el);
                    }
                    p.flags.delete(n);
                }
            }
            put(p.count, plural(names.size, 'flag', 'flags') + (pr ? ', ' + pr + ' rolled back' : ''), '');
        }
        for (const [n, p] of projects) {
            if (!seen.has(n)) {
                p.el.remove();
                p.option.remove();
                projects.delete(n);
            }
        }
        // (re)place the cards only when the set or order of flags changed
        const k = keys.join('\n\n');
        if (k !== order) {
            order = k;
            const main = $('flags');
            for (const pj of doc.projects || []) {
                const p = projects.get(pj.name);
                main.appendChild(p.el);
                for (const f of pj.flags || []) {
                    p.cards.appendChild(p.flags.get(f.name).el);
                }
            }
        }
        put($('summary'), plural(projects.size, 'project', 'projects') + ', ' + plural(total, 'flag', 'flags') +
            ': ' + rolled + ' rolled back, ' + over + ' overridden, ' + ramps + ' ramping', '');
        setClass($('summary'), 'line' + (rolled ? ' bad' : ''));
        renderSync(doc.sync);
        renderEvents(doc.events);
        filter();
    }

    function renderSync(s) {
        const e = $('sync');
        if (!s) {
            put(e, 'Fleet sync: not configured', '');
            setClass(e, 'line muted');
            return;
        }
        const parts = [s.connected ? 'connected' : 'NOT connected'];
        // how old this host's view of the fleet is; stale past 3 intervals,
        // the FlagsFleetStale alert's threshold (docs/sync.md, "Staleness")
        const age = typeof s.staleSeconds === 'number' ? s.staleSeconds : null;
        const stale = age !== null && s.intervalMs > 0 && age * 1000 > 3 * s.intervalMs;
        if (age === null) {
            parts.push('no round yet');
        } else if (stale) {
            parts.push('STALE: view ' + num(age, 1) + ' s old (over 3 intervals of ' +
                       num(s.intervalMs, 0) + ' ms)');
        } else {
            parts.push('view ' + num(age, 1) + ' s old');
        }
        if (s.lagMs !== undefined && s.lagMs !== null) {
            parts.push('lag ' + num(s.lagMs, 0) + ' ms');
        }
        parts.push('last success ' + (s.lastSuccess ? clock(s.lastSuccess) + ' (' + ago(s.lastSuccess) + ')' : 'never'));
        parts.push(plural(s.failures || 0, 'failure', 'failures'));
        parts.push(plural(s.rounds || 0, 'round', 'rounds'));
        put(e, 'Fleet sync: ' + parts.join(', '), s.lastSuccess || '');
        setClass(e, 'line ' + (stale || !s.connected ? 'bad' : s.failures ? 'warn' : 'good'));
    }

    const KINDS = {
        rollback: 'rolled back', clear: 'rollback cleared', override: 'override set',
        overrideRemoved: 'override removed', stage: 'ramp stage', ramp: 'ramp', definition: 'new definition',
    };

    function renderEvents(list) {
        const ol = $('events');
        list = Array.isArray(list) ? list : [];
        $('events-none').hidden = list.length > 0;
        $('events-none').textContent = 'events' in lastDoc ? 'No events yet.' : 'This nginx reports no events.';
        const keep = new Set();
        let before = ol.firstChild;
        // newest first, as flags_status gives them
        for (const ev of list) {
            // a restarted nginx counts from 1 again: the time tells them apart
            const key = ev.seq + ' ' + ev.at;
            keep.add(key);
            let li = events.get(key);
            if (!li) {
                li = el('li');
                const t = el('time', '', clock(ev.at));
                t.dateTime = String(ev.at);
                t.title = String(ev.at);
                const what = (KINDS[ev.kind] || String(ev.kind)) + ': ' +
                    (ev.project ? ev.project + (ev.flag ? '/' + ev.flag : '') : '');
                const by = 'by ' + (ev.by || '?') + (ev.who !== null && ev.who !== undefined ? ' (' + ev.who + ')' : '');
                li.append(t, el('span', 'what', what), el('span', 'detail', by + (ev.detail ? ': ' + ev.detail : '')));
                li.setAttribute('aria-label', ev.kind + ' ' + (ev.project || '') + ' ' + (ev.flag || '') + ' at ' + ev.at);
                li.className = 'k-' + String(ev.kind).replace(/[^A-Za-z]/g, '');
                events.set(key, li);
            }
            if (li !== before) {
                ol.insertBefore(li, before);
            } else {
                before = before.nextSibling;
            }
            before = li.nextSibling;
        }
        for (const [key, li] of events) {
            if (!keep.has(key)) {
                li.remove();
                events.delete(key);
            }
        }
    }

    // ---- filters ----

    function filter() {
        const name = $('f-name').value.trim().toLowerCase();
        const pj = $('f-project').value;
        const st = $('f-state').value;
        let shown = 0;
        let all = 0;
        for (const [pn, p] of projects) {
            let any = 0;
            for (const c of p.flags.values()) {
                all++;
                const ok = (!pj || pj === pn) && (!name || c.name.toLowerCase().includes(name)) &&
                    (!c.flag || matches(c.flag, st));
                if (c.el.hidden === ok) {
                    c.el.hidden = !ok;
                }
                any += ok ? 1 : 0;
            }
            if (p.el.hidden === (any > 0)) {
                p.el.hidden = any === 0;
            }
            shown += any;
        }
        const text = shown === all ? 'all ' + plural(all, 'flag', 'flags') : shown + ' of ' + plural(all, 'flag', 'flags') + ' shown';
        if ($('shown').value !== text) {
            $('shown').value = text;
        }
    }

    // ---- reading ----

    function live(text, cls) {
        put($('live'), text, '');
        setClass($('live'), 'line ' + cls);
    }

    async function refresh() {
        if (busy) {
            again = true;
            return;
        }
        busy = true;
        clearTimeout(timer);
        try {
            const res = await fetch(cfg.status, { cache: 'no-store', credentials: 'same-origin' });
            if (!res.ok) {
                throw new Error(cfg.status + ' answered ' + res.status);
            }
            lastDoc = await res.json();
            render(lastDoc);
            lastOk = Date.now();
            lastErr = '';
        } catch (e) {
            lastErr = cfg.status + ': ' + (e && e.message ? e.message : String(e));
        } finally {
            state();
            busy = false;
            if (again) {
                again = false;
                soon();
            } else {
                schedule();
            }
        }
    }

    // the chart's reading: 5 s after the last one, only while visible
    function schedule() {
        clearTimeout(timer);
        if (!document.hidden) {
            timer = setTimeout(refresh, POLL_MS);
        }
    }

    function soon() {
        clearTimeout(debounce);
        debounce = setTimeout(refresh, DEBOUNCE_MS);
    }

    // "Live" only with the stream open and the last reading a success; the
    // time is always the last successful reading's, never the clock's
    function state() {
        const read = lastOk ? 'read ' + clock(new Date(lastOk).toISOString()) : '';
        if (!lastOk) {
            live(lastErr ? 'Not read: ' + lastErr : 'Connecting…', lastErr ? 'bad' : 'warn');
        } else if (lastErr) {
            live('Stale: ' + lastErr + ' (last ' + read + ')', 'bad');
        } else if (!source || source.readyState === 2) {
            live('Not live: no event stream (reading every 5 s) · ' + read, 'warn');
        } else if (source.readyState === 0) {
            live('Reconnecting to the event stream… · ' + read, 'warn');
        } else {
            live('Live · ' + read, 'good');
        }
    }

    function connect() {
        if (typeof EventSource !== 'function') {
            return;
        }
        source = new EventSource(cfg.events);
        source.onopen = () => {
            state();
            soon();   // whatever changed while the stream was down
        };
        source.onerror = () => state();
        source.onmessage = (m) => {
            let d = null;
            try {
                d = JSON.parse(m.data);
            } catch {
                return;
            }
            if (d && d.type === 'changed') {
                soon();
            }
        };
    }

    // ---- actions (only with config.json's "admin") ----

    const ACTIONS = {
        clear: { title: 'Clear the rollback', verb: 'Clear rollback', method: 'DELETE', path: 'rollbacks/',
                 text: (id) => 'Clear the rollback of ' + id + '? Its window is emptied and it serves its percentage again.' },
        kill: { title: 'Kill the flag', verb: 'Kill', method: 'PUT', path: 'overrides/', body: { enabled: false },
                text: (id) => 'Turn ' + id + ' off for everyone with an override (until the override is removed)?' },
        set: { title: 'Set an override percentage', verb: 'Set override', method: 'PUT', path: 'overrides/',
               text: (id) => 'Serve ' + id + ' to this percentage of users, whatever its file says:' },
        remove: { title: 'Remove the override', verb: 'Remove override', method: 'DELETE', path: 'overrides/',
                  text: (id) => 'Remove the override of ' + id + '? It serves its configured percentage again.' },
        pause: { title: 'Pause the ramp', verb: 'Pause', method: 'PUT', path: 'ramps/', body: { action: 'pause' },
                 text: (id) => 'Pause the ramp of ' + id + ' at its stage?' },
        resume: { title: 'Resume the ramp', verb: 'Resume', method: 'PUT', path: 'ramps/', body: { action: 'resume' },
                  text: (id) => 'Resume the ramp of ' + id + '?' },
    };

    function ask(b) {
        const art = b.closest('.flag');
        const a = ACTIONS[b.dataset.action];
        if (!art || !a) {
            return;
        }
        const p = art.dataset.project;
        const f = art.dataset.flag;
        pending = { a, p, f };
        opener = b;
        $('confirm-title').textContent = a.title;
        $('confirm-text').textContent = a.text(p + '/' + f);
        $('confirm-ok').textContent = a.verb;
        const isSet = b.dataset.action === 'set';
        $('confirm-pct-row').hidden = !isSet;
        $('confirm-pct').required = isSet;
        if (isSet) {
            const c = projects.get(p).flags.get(f);
            const o = c.flag && c.flag.override;
            $('confirm-pct').value = o && o.rolloutPercentage !== undefined ? o.rolloutPercentage
                : c.flag ? c.flag.effectiveRolloutPercentage : '';
        }
        $('confirm').showModal();
        (isSet ? $('confirm-pct') : $('confirm-ok')).focus();
    }

    // The answer is taken from the form's submit, which names its button
    // at once; the dialog's close event comes a task later, when another
    // dialog may already be open (a quick Escape, then Enter).
    function submitted(e) {
        const job = pending;
        if (!e.submitter || e.submitter.value !== 'ok' || !job) {
            return;
        }
        pending = null;
        let body = job.a.body;
        if (job.a === ACTIONS.set) {
            body = { rolloutPercentage: Number($('confirm-pct').value) };
        }
        send(job.a, job.p, job.f, body);
    }

    function closed() {
        if ($('confirm').open) {
            return;
        }
        pending = null;
        if (opener && opener.isConnected && document.activeElement !== opener) {
            opener.focus();
        }
    }

    async function send(a, p, f, body) {
        let base = cfg.admin;
        if (!base.endsWith('/')) {
            base += '/';
        }
        const url = base + a.path + encodeURIComponent(p) + '/' + encodeURIComponent(f);
        const what = a.verb + ' ' + p + '/' + f;
        const init = { method: a.method, credentials: 'same-origin', cache: 'no-store',
                       headers: { 'Content-Type': 'application/json' } };
        if (body !== undefined) {
            init.body = JSON.stringify(body);
        }
        show(what + ': sending…', false);
        try {
            const res = await fetch(url, init);
            let msg = '';
            const text = await res.text();
            if (text) {
                try {
                    const j = JSON.parse(text);
                    msg = (j.error ? j.error + ': ' : '') + (j.message || '');
                } catch {
                    msg = text.slice(0, 200);
                }
            }
            const ok = res.status >= 200 && res.status < 300;
            show(what + ': ' + res.status + (ok ? ' done' : ' ' + (res.statusText || 'failed')) + (msg ? ' (' + msg + ')' : ''), !ok);
        } catch (e) {
            show(what + ': not sent (' + e.message + ')', true);
        }
        soon();
    }


    // ---- definitions changed at runtime (definitions=runtime, with admin) ----
    //
    // Edit one flag (enabled, rolloutPercentage, segments) or revert the
    // project to an old version. Every write is shown first as its dry run
    // (?dryRun=1: what is added, changed, removed, and the rollbacks and
    // overrides that stay in force on changed flags), then applied with
    // If-Match of the version the page read: someone else's write in
    // between is a 412, and nothing is applied.

    let job = null;               // what the definitions dialog is doing
    let defsOpener = null;

    function defsUrl(p, rest) {
        let base = cfg.admin;
        if (!base.endsWith('/')) {
            base += '/';
        }
        return base + 'definitions/' + encodeURIComponent(p) + (rest || '');
    }

    // one admin call: its status, body (text and JSON) and version (ETag)
    async function call(method, url, body, version) {
        const headers = {};
        if (body !== undefined) {
            headers['Content-Type'] = 'application/json';
        }
        if (version) {
            headers['If-Match'] = '"v' + version + '"';
        }
        const res = await fetch(url, { method, headers, body, credentials: 'same-origin', cache: 'no-store' });
        const text = await res.text();
        let json = null;
        try {
            json = text ? JSON.parse(text) : null;
        } catch {
            json = null;
        }
        const m = /^"v(\d+)"$/.exec(res.headers.get('ETag') || '');
        return { status: res.status, ok: res.ok, text, json, version: m ? Number(m[1]) : 0,
                 why: res.status + ' ' + (json && json.error ? json.error + (json.message ? ': ' + json.message : '')
                     : res.statusText || 'failed') };
    }

    function nameList(list) {
        return Array.isArray(list) && list.length ? list.join(', ') : '–';
    }

    function segText(list) {
        return Array.isArray(list) && list.length ? list.join(', ') : 'none (everyone)';
    }

    // the dialog's parts: which are shown, the line that says where it is
    function stage(text, failed, parts) {
        put($('defs-text'), text, '');
        setClass($('defs-text'), failed ? 'bad' : '');
        for (const id of ['defs-edit', 'defs-history', 'defs-diff', 'defs-reload', 'defs-preview', 'defs-apply']) {
            $(id).hidden = !parts.includes(id);
        }
    }

    function busyDefs(on) {
        for (const id of ['defs-reload', 'defs-preview', 'defs-apply']) {
            $(id).disabled = on;
        }
    }

    function openDefs(b, j, title) {
        job = j;
        defsOpener = b;
        $('defs-title').textContent = title;
        $('defs-diff').replaceChildren();
        stage('Reading the definitions…', false, []);
        busyDefs(false);
        if (!$('defs').open) {
            $('defs').showModal();
        }
        $('defs-close').focus();
    }

    function openEdit(b) {
        const art = b.closest('.flag');
        const p = art.dataset.project;
        const f = art.dataset.flag;
        openDefs(b, { kind: 'edit', p, f }, 'Edit ' + p + '/' + f);
        loadEdit(job);
    }

    async function loadEdit(j) {
        let r;
        try {
            r = await call('GET', defsUrl(j.p));
        } catch (e) {
            r = { ok: false, why: 'not sent (' + e.message + ')' };
        }
        if (job !== j) {
            return;
        }
        const doc = r.json;
        const orig = r.ok && doc && Array.isArray(doc.flags)
            ? doc.flags.find((x) => x && typeof x === 'object' && x.name === j.f) : null;
        if (!r.ok || !orig || !r.version) {
            stage(r.ok ? 'Version ' + r.version + ' of ' + j.p + ' has no flag ' + j.f + '.'
                : 'The definitions were not read: ' + r.why, true, ['defs-reload']);
            return;
        }
        j.read = r.version;
        j.orig = orig;
        j.rules = Array.isArray(orig.rules);
        $('defs-enabled').checked = orig.enabled !== false;
        $('defs-pct').value = typeof orig.rolloutPercentage === 'number' ? orig.rolloutPercentage : 100;
        const has = new Set(Array.isArray(orig.segments) ? orig.segments : []);
        const all = Object.keys(doc.segments && typeof doc.segments === 'object' ? doc.segments : {});
        for (const s of has) {
            if (!all.includes(s)) {
                all.push(s);
            }
        }
        const list = $('defs-seglist');
        list.replaceChildren();
        for (const s of all) {
            const box = el('input');
            box.type = 'checkbox';
            box.value = s;
            box.checked = has.has(s);
            box.disabled = j.rules;
            const l = el('label', 'check');
            l.append(box, ' ' + s);
            list.appendChild(l);
        }
        // rules and named users are shown, never edited here: the body
        // sent is the document's flag with the three fields replaced, so
        // they reach the server (which validates them) as they were read
        const tl = [];
        if (orig.targets && typeof orig.targets === 'object') {
            const n = (l) => new Set(Array.isArray(l) ? l : []).size;
            tl.push('named users: ' + num(n(orig.targets.on), 0) + ' on, ' + num(n(orig.targets.off), 0) + ' off');
        }
        if (j.rules) {
            orig.rules.forEach((r, k) => {
                tl.push('rule ' + k + ': ' + ruleSegments(r && r.segments) + ' → ' + pct(r && r.rolloutPercentage));
            });
        }
        $('defs-tgtlist').replaceChildren(...tl.map((t) => el('li', '', t)));
        $('defs-tgt').hidden = tl.length === 0;
        $('defs-pct-label').textContent = j.rules ? 'Fallthrough percentage, when no rule matches (0 to 100)'
            : 'Rollout percentage (0 to 100)';
        $('defs-segs').hidden = all.length === 0 && !j.rules;
        $('defs-segs-legend').textContent = j.rules ? 'Segments: set by the flag\'s rules (edit the document)'
            : 'Segments (none checked: everyone)';
        stage('Version ' + j.read + ' of the definitions. Nothing is applied before you see its difference.',
              false, ['defs-edit', 'defs-preview']);
        $('defs-pct').focus();
    }

    // the flag as the form says it: every other field of the document's kept
    function editedFlag(j) {
        const f = JSON.parse(JSON.stringify(j.orig));
        f.enabled = $('defs-enabled').checked;
        f.rolloutPercentage = Number($('defs-pct').value);
        if (!j.rules) {
            const segs = [...$('defs-seglist').querySelectorAll('input:checked')].map((b) => b.value);
            if (segs.length) {
                f.segments = segs;
            } else {
                delete f.segments;
            }
        }
        return f;
    }

    // a field changed after the preview: the preview no longer holds
    function edited() {
        if (job && job.kind === 'edit' && job.orig && !$('defs-apply').hidden) {
            stage('Changed since the preview: preview it again.', false, ['defs-edit', 'defs-preview']);
        }
    }

    function openHistory(b) {
        const p = b.closest('section.project').dataset.project;
        openDefs(b, { kind: 'history', p }, 'Definitions of ' + p + ': history');
        loadHistory(job);
    }

    async function loadHistory(j) {
        let cur;
        let h;
        try {
            [cur, h] = await Promise.all([call('GET', defsUrl(j.p)), call('GET', defsUrl(j.p, '/history'))]);
        } catch (e) {
            cur = { ok: false, why: 'not sent (' + e.message + ')' };
        }
        if (job !== j) {
            return;
        }
        if (!cur.ok || !h.ok || !cur.version || !h.json || !Array.isArray(h.json.versions)) {
            stage('The history was not read: ' + (cur.ok ? h.why : cur.why), true, ['defs-reload']);
            return;
        }
        j.kind = 'history';
        j.read = cur.version;
        const body = $('defs-versions').tBodies[0];
        body.replaceChildren();
        for (const v of h.json.versions) {
            const tr = el('tr');
            const at = el('td', 'num');
            const t = el('time', '', clock(v.at));
            t.dateTime = String(v.at);
            at.appendChild(t);
            tr.append(el('td', 'num', 'v' + v.version), at, el('td', '', v.by === null || v.by === undefined ? '–' : String(v.by)),
                      el('td', '', nameList(v.added)), el('td', '', nameList(v.changed)), el('td', '', nameList(v.removed)));
            const act = el('td');
            if (v.version === j.read) {
                act.textContent = 'current';
            } else {
                const b = el('button', '', 'Revert to v' + v.version);
                b.type = 'button';
                b.dataset.revert = String(v.version);
                b.setAttribute('aria-label', 'Revert ' + j.p + ' to version ' + v.version + ' (see its difference first)');
                act.appendChild(b);
            }
            tr.appendChild(act);
            body.appendChild(tr);
        }
        stage('Version ' + j.read + ' is served. Reverting writes an old version again as a new one, ' +
              'after its difference is shown.', false, ['defs-history']);
    }

    async function revert(n) {
        const j = job;
        if (!j || j.kind !== 'history') {
            return;
        }
        j.kind = 'revert';
        j.target = n;
        $('defs-title').textContent = 'Revert ' + j.p + ' to version ' + n;
        stage('Reading version ' + n + '…', false, []);
        let r;
        try {
            r = await call('GET', defsUrl(j.p, '/versions/' + n));
        } catch (e) {
            r = { ok: false, why: 'not sent (' + e.message + ')' };
        }
        if (job !== j) {
            return;
        }
        if (!r.ok) {
            stage('Version ' + n + ' was not read: ' + r.why, true, ['defs-reload']);
            return;
        }
        j.body = r.text;
        j.url = defsUrl(j.p);
        await dryRun(j);
    }

    async function preview(j) {
        j.body = JSON.stringify(editedFlag(j));
        j.url = defsUrl(j.p, '/flags/' + encodeURIComponent(j.f));
        await dryRun(j);
    }

    async function dryRun(j) {
        busyDefs(true);
        let r;
        try {
            r = await call('PUT', j.url + '?dryRun=1', j.body, j.read);
        } catch (e) {
            r = { ok: false, status: 0, why: 'not sent (' + e.message + ')' };
        }
        if (job !== j) {
            return;
        }
        busyDefs(false);
        const form = j.kind === 'edit' ? ['defs-edit'] : [];
        if (r.status === 412) {
            conflict(j);
        } else if (!r.ok || !r.json) {
            stage('Refused: ' + r.why, true, form.concat(j.kind === 'edit' ? ['defs-preview'] : ['defs-reload']));
        } else {
            const any = diff(j, r.json);
            stage(any ? 'Nothing is applied yet: this is the difference.' : 'Nothing to apply.', false,
                  form.concat(['defs-diff'], any ? ['defs-apply'] : []));
            $('defs-apply').textContent = j.kind === 'revert' ? 'Revert to version ' + j.target : 'Apply';
            (any ? $('defs-apply') : $('defs-close')).focus();
        }
    }

    function conflict(j) {
        stage('Someone else changed it: reload the definitions. This page read version ' + j.read +
              ', which is no longer the current one; nothing was applied.', true, ['defs-reload']);
        $('defs-reload').focus();
    }

    // the dry run's answer, as a person reads it; false when nothing changes
    function diff(j, a) {
        const box = $('defs-diff');
        box.replaceChildren();
        const added = Array.isArray(a.added) ? a.added : [];
        const changed = Array.isArray(a.changed) ? a.changed : [];
        const removed = Array.isArray(a.removed) ? a.removed : [];
        if (!added.length && !changed.length && !removed.length) {
            box.appendChild(el('p', '', 'No change: version ' + j.read + ' already says this.'));
            return false;
        }
        box.appendChild(el('p', 'lead', (j.kind === 'revert' ? 'Reverting to version ' + j.target + ' makes' : 'Applying makes') +
            ' version ' + a.version + ' (now ' + j.read + '):'));
        const ul = el('ul', 'lists');
        ul.append(el('li', '', 'Added: ' + nameList(added)), el('li', '', 'Changed: ' + nameList(changed)),
                  el('li', '', 'Removed: ' + nameList(removed)));
        box.appendChild(ul);
        if (j.kind === 'edit') {
            const nw = JSON.parse(j.body);
            const o = j.orig;
            const rows = [];
            if ((o.enabled !== false) !== nw.enabled) {
                rows.push('enabled: ' + (o.enabled !== false) + ' → ' + nw.enabled);
            }
            if (o.rolloutPercentage !== nw.rolloutPercentage) {
                rows.push('rolloutPercentage' + (j.rules ? ' (fallthrough)' : '') + ': ' + pct(o.rolloutPercentage) + ' → ' + pct(nw.rolloutPercentage));
            }
            if (segText(o.segments) !== segText(nw.segments)) {
                rows.push('segments: ' + segText(o.segments) + ' → ' + segText(nw.segments));
            }
            if (rows.length) {
                const f = el('ul', 'fields');
                f.setAttribute('aria-label', 'what changes in ' + j.f);
                for (const t of rows) {
                    f.appendChild(el('li', '', j.f + ': ' + t));
                }
                box.appendChild(f);
            }
        }
        const kept = Array.isArray(a.kept) ? a.kept : [];
        if (!kept.length) {
            box.appendChild(el('p', 'kept', 'No rollback or override is in force on the changed flags.'));
        } else {
            box.appendChild(el('p', 'kept warn', 'Still in force after applying: a new definition keeps these; ' +
                'clear them from the flag\'s card if they should go.'));
            const k = el('ul', 'keptlist');
            for (const e of kept) {
                const parts = [];
                if (e.rolledBack) {
                    parts.push('rolled back (off for everyone until the rollback is cleared)');
                }
                if (e.override) {
                    parts.push('override: ' + overrideText(e.override));
                }
                k.appendChild(el('li', '', String(e.flag) + ': ' + (parts.join('; ') || 'kept')));
            }
            box.appendChild(k);
        }
        return true;
    }

    async function apply(j) {
        busyDefs(true);
        let r;
        try {
            r = await call('PUT', j.url, j.body, j.read);
        } catch (e) {
            r = { ok: false, status: 0, why: 'not sent (' + e.message + ')' };
        }
        if (job !== j) {
            return;
        }
        busyDefs(false);
        const what = j.kind === 'revert' ? 'Revert ' + j.p + ' to version ' + j.target : 'Edit ' + j.p + '/' + j.f;
        if (r.status === 412) {
            conflict(j);
            show(what + ': 412 someone else changed it: reload the definitions', true);
        } else if (!r.ok || !r.json) {
            stage('Not applied: ' + r.why, true, ['defs-diff', 'defs-reload']);
            show(what + ': ' + r.why, true);
        } else {
            $('defs').close();
            show(what + ': version ' + r.json.version + ' applied (added: ' + nameList(r.json.added) + '; changed: ' +
                 nameList(r.json.changed) + '; removed: ' + nameList(r.json.removed) + ')', false);
        }
        soon();
    }

    // Enter in a field submits with the form's first button: the step at
    // hand is taken, whichever button that is
    function defsSubmitted(e) {
        e.preventDefault();
        const j = job;
        if (!j || $('defs-preview').disabled) {
            return;
        }
        let step = e.submitter && !e.submitter.hidden ? e.submitter.value : '';
        if (!step) {
            step = !$('defs-apply').hidden ? 'apply' : !$('defs-preview').hidden ? 'preview'
                : !$('defs-reload').hidden ? 'reload' : '';
        }
        if (step === 'preview' && j.kind === 'edit' && j.orig) {
            preview(j);
        } else if (step === 'apply' && j.body !== undefined) {
            apply(j);
        } else if (step === 'reload') {
            $('defs-diff').replaceChildren();
            stage('Reading the definitions…', false, []);
            if (j.kind === 'edit') {
                loadEdit(j);
            } else {
                $('defs-title').textContent = 'Definitions of ' + j.p + ': history';
                j.kind = 'history';
                loadHistory(j);
            }
        }
    }

    function defsClosed() {
        job = null;
        if (defsOpener && defsOpener.isConnected && document.activeElement !== defsOpener) {
            defsOpener.focus();
        }
    }

    let answerTimer = 0;

    function show(text, failed) {
        const a = $('answer');
        $('answer-text').textContent = text;
        // the box comes and goes: screen readers hear it from a region that stays
        $('announce').textContent = text;
        a.className = 'answer' + (failed ? ' failed' : '');
        a.hidden = false;
        clearTimeout(answerTimer);
        // a failure stays until the next action; a success fades after 8 s
        if (!failed) {
            answerTimer = setTimeout(() => { a.hidden = true; }, 8000);
        }
    }

    // ---- start ----

    async function start() {
        try {
            const res = await fetch('config.json', { cache: 'no-store', credentials: 'same-origin' });
            if (res.ok) {
                const j = await res.json();
                cfg.admin = typeof j.admin === 'string' && j.admin !== '' ? j.admin : null;
                cfg.status = typeof j.status === 'string' ? j.status : cfg.status;
                cfg.events = typeof j.events === 'string' ? j.events : cfg.events;
            }
        } catch {
            // read-only with the default names
        }
        document.body.classList.toggle('admin', cfg.admin !== null);
        for (const id of ['f-name', 'f-project', 'f-state']) {
            $(id).addEventListener('input', filter);
        }
        $('filters').addEventListener('submit', (e) => e.preventDefault());
        $('flags').addEventListener('click', (e) => {
            const b = e.target.closest('button[data-action]');
            if (!b || b.disabled) {
                return;
            }
            if (b.dataset.action === 'edit') {
                openEdit(b);
            } else if (b.dataset.action === 'history') {
                openHistory(b);
            } else {
                ask(b);
            }
        });
        $('confirm-form').addEventListener('submit', submitted);
        $('confirm').addEventListener('close', closed);
        $('defs-form').addEventListener('submit', defsSubmitted);
        $('defs-close').addEventListener('click', () => $('defs').close());
        $('defs').addEventListener('close', defsClosed);
        $('defs-edit').addEventListener('input', edited);
        $('defs-versions').addEventListener('click', (e) => {
            const b = e.target.closest('button[data-revert]');
            if (b && !b.disabled) {
                revert(Number(b.dataset.revert));
            }
        });
        $('answer-close').addEventListener('click', () => {
            $('answer').hidden = true;
        });
        document.addEventListener('visibilitychange', () => {
            if (document.hidden) {
                clearTimeout(timer);
            } else {
                soon();
            }
        });
        connect();
        await refresh();
    }

    if (document.readyState === 'loading') {
        document.addEventListener('DOMContentLoaded', start);
    } else {
        start();
    }
}());
