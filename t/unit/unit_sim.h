/*
 * unit_sim.h - the simulations' random numbers (test_regression.c,
 * test_ramp.c, test_witness.c): a seeded xorshift64* and binomial draws
 * by inversion, so every simulated run is the same on every machine.
 */

#ifndef UNIT_SIM_H
#define UNIT_SIM_H

#include <math.h>
#include <stdint.h>

static uint64_t rng_state = 1;

static void rng_seed(uint64_t s)
{
    rng_state = s ? s : 1;
}

static uint64_t rng_next(void)          /* xorshift64* */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

/* uniform in [0, 1) */
static double rng_unit(void)
{
    return (double) (rng_next() >> 11) / 9007199254740992.0;
}

/* binomial(n, p) by inversion of its distribution (small n p) */
static uint64_t binomial(uint64_t n, double p)
{
    if (n == 0 || p <= 0) {
        return 0;
    }
    double u = rng_unit();
    double q = 1 - p;
    double prob = pow(q, (double) n);
    double cdf = prob;
    uint64_t k = 0;
    while (u > cdf && k < n) {
        prob *= (double) (n - k) / (double) (k + 1) * p / q;
        k++;
        cdf += prob;
    }
    return k;
}

#endif
