/*
 * regression.cpp - the ramp's regression rule (docs/regression.md): is the
 * on cohort failing more often than the off cohort, beyond chance, under
 * continuous monitoring?
 *
 * A mixture sequential probability ratio test on the split of each tick's
 * errors between the two cohorts.  Given E errors in a tick and the on
 * cohort's share pi of the tick's requests, if both cohorts fail at the
 * same rate the on cohort's errors e1 are binomial(E, pi).  Against the
 * alternative "the on cohort fails theta times as often" each tick
 * contributes the likelihood ratio
 *
 *     LR(theta) = theta^e1 / (1 + pi (theta - 1))^E
 *
 * whose expectation under the null is 1.  Raised to 1/phi (phi >= 1, the
 * dispersion) its expectation is at most 1 (Jensen: x^(1/phi) is concave),
 * so the running product is a non-negative supermartingale starting at 1,
 * as is the mean of such products over a fixed grid of theta.  Ville's
 * inequality bounds the chance that it ever reaches 1/alpha by alpha,
 * however long and however often it is looked at.  Logs are kept, one a
 * ratio of the grid, in the caller's memory (a POD).
 */

#include <cmath>
#include <cstring>

#include "flags_core.h"

namespace {

/* the alternatives: the on cohort fails theta times as often */
constexpr double grid[FL_REGRESSION_GRID] = {1.5, 2.0, 3.0, 5.0, 10.0};

/* log of the mean of exp(l[i]) without overflow */
double log_mean_exp(const double *l)
{
    double m = l[0];
    for (int i = 1; i < FL_REGRESSION_GRID; i++) {
        if (l[i] > m) {
            m = l[i];
        }
    }
    double s = 0;
    for (int i = 0; i < FL_REGRESSION_GRID; i++) {
        s += std::exp(l[i] - m);
    }
    return m + std::log(s / FL_REGRESSION_GRID);
}

} // namespace


extern "C" {

void fl_regression_init(fl_regression_t *r) noexcept
{
    if (r != nullptr) {
        std::memset(r, 0, sizeof(*r));
    }
}

double fl_regression_theta(int i) noexcept
{
    return i >= 0 && i < FL_REGRESSION_GRID ? grid[i] : 0;
}

int fl_regression_tick(fl_regression_t *r, uint64_t n1, uint64_t n0,
    uint64_t e1, uint64_t e0, double dispersion, double alpha) noexcept
{
    if (r == nullptr) {
        return 0;
    }

    r->ticks++;

    /* no control group or no error: nothing is learnt (errors beyond the
     * requests counted are clamped: a report may outlive its request's
     * tick, but it cannot make a cohort fail more than always) */
    if (n1 == 0 || n0 == 0) {
        return r->decided;
    }
    if (e1 > n1) {
        e1 = n1;
    }
    if (e0 > n0) {
        e0 = n0;
    }
    if (e1 == 0 && e0 == 0) {
        return r->decided;
    }

    double phi = dispersion >= 1 ? dispersion : 1;
    /* in doubles: n1 + n0 may not fit 64 bits */
    double pi = static_cast<double>(n1)
                / (static_cast<double>(n1) + static_cast<double>(n0));
    double de1 = static_cast<double>(e1);
    double de = static_cast<double>(e1) + static_cast<double>(e0);

    for (int i = 0; i < FL_REGRESSION_GRID; i++) {
        double th = grid[i];
        r->log_lr[i] += (de1 * std::log(th) - de * std::log1p(pi * (th - 1)))
                        / phi;
    }

    r->errors_on += e1;
    r->errors_off += e0;

    if (!r->decided
        && alpha > 0 && alpha < 1
        && log_mean_exp(r->log_lr) >= -std::log(alpha))
    {
        r->decided = 1;
        r->decided_tick = r->ticks;
    }

    return r->decided;
}

double fl_regression_log_evidence(const fl_regression_t *r) noexcept
{
    return r != nullptr ? log_mean_exp(r->log_lr) : 0;
}

double fl_regression_ratio(const fl_regression_t *r, double alpha) noexcept
{
    if (r == nullptr || !(alpha > 0 && alpha < 1)) {
        return 0;
    }
    /* the evidence as a share of its bound 1/alpha: 1 decides (at most
     * 1e9, so a reader never meets an infinity) */
    double l = log_mean_exp(r->log_lr) + std::log(alpha);
    return l > std::log(1e9) ? 1e9 : std::exp(l);
}

} // extern "C"
