/* The split choice without timing noise: vh_split_balance against the continuous optimum (the cut
 * where the two stages' per-frame times cross), and the scheduler's moves from synthetic frames
 * whose stage times are known: towards the balance, inside the zone, not for a small gain. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/split_scheduler.h"
#include "plan/split_calibration.h"
#include "test_support.h"

static double slower(const vh_stage_costs *c, uint32_t n, uint32_t s)
{
    double t0 = c->fixed_ns[0] + s * c->block_ns[0], t1 = c->fixed_ns[1] + (double)(n - s) * c->block_ns[1];
    return t0 > t1 ? t0 : t1;
}

START_TEST(test_balance_at_the_crossing)
{
    srand(7);
    for (int trial = 0; trial < 2000; trial++) {
        vh_stage_costs c = {.fixed_ns = {rand() % 50000, rand() % 50000},
                            .block_ns = {1 + rand() % 20000, 1 + rand() % 20000}};
        const uint32_t n = 1 + (uint32_t)(rand() % 40);
        const uint32_t s = vh_split_balance(&c, n);
        ck_assert_uint_le(s, n);
        /* max(t0, t1) is smallest at the integer next to where t0 = t1 */
        double cross = (c.fixed_ns[1] + n * c.block_ns[1] - c.fixed_ns[0]) / (c.block_ns[0] + c.block_ns[1]);
        cross = fmin(fmax(cross, 0), n);
        const uint32_t lo = (uint32_t)floor(cross), hi = (uint32_t)ceil(cross);
        ck_assert_msg(s == lo || s == hi, "n %u: chose %u, crossing at %.3f", n, s, cross);
        ck_assert(slower(&c, n, s) <= slower(&c, n, s == lo ? hi : lo));
    }
}
END_TEST

/* A frame that ran `split` blocks on stage 0 with these per-block costs (ns, whole frame). */
static vh_frame_job frame(uint32_t split, uint32_t n, double block0, double block1, double vision, double head)
{
    vh_frame_job j;
    memset(&j, 0, sizeof j);
    j.llm_split = split;
    j.n_passes = 7;
    j.vision_ns = (int64_t)vision;
    j.head_ns[VH_PASS_PREFILL] = (int64_t)(head / 7);
    j.head_ns[VH_PASS_DECODE] = (int64_t)(head * 6 / 7);
    /* half of a block's frame cost in the prefill, half over the 6 decode passes */
    j.stage_busy_ns[0][VH_PASS_PREFILL] = (int64_t)(vision + split * block0 / 2);
    j.stage_busy_ns[0][VH_PASS_DECODE] = (int64_t)(split * block0 / 2);
    j.stage_busy_ns[1][VH_PASS_PREFILL] = (int64_t)(j.head_ns[0] + (n - split) * block1 / 2);
    j.stage_busy_ns[1][VH_PASS_DECODE] = (int64_t)(j.head_ns[1] + (n - split) * block1 / 2);
    return j;
}

/* A plan of n LLM blocks cut at `split`, free to move in [lo, hi]. */
static vh_plan zone_plan(uint32_t n, uint32_t split, uint32_t lo, uint32_t hi)
{
    vh_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.n_llm_layers = n;
    plan.llm_split = split;
    plan.split_min = lo;
    plan.split_max = hi;
    return plan;
}

START_TEST(test_scheduler_moves_towards_balance)
{
    /* 8 blocks, given split 4 with a zone of 2: the cut may go to 2..6 */
    vh_plan plan = zone_plan(8, 4, 2, 6);
    vh_split_scheduler s;
    vh_split_scheduler_init(&s, &plan, 7, NULL);
    const uint32_t none[2] = {0, 0};
    ck_assert_uint_eq(vh_split_scheduler_choose(&s, none), 4); /* nothing measured yet: stay */

    /* stage 1 three times slower a block: balance s = 3 (8 - s) -> 6 */
    vh_frame_job j = frame(4, 8, 1e6, 3e6, 0, 0);
    vh_split_scheduler_observe(&s, &j);
    ck_assert_uint_eq(vh_split_scheduler_choose(&s, none), 6);
    /* the same costs seen from the new cut: no move */
    j = frame(6, 8, 1e6, 3e6, 0, 0);
    vh_split_scheduler_observe(&s, &j);
    ck_assert_uint_eq(vh_split_scheduler_choose(&s, none), 6);
    uint32_t split, changes;
    int64_t prefill[2], decode[2];
    vh_split_scheduler_read(&s, &split, &changes, prefill, decode);
    ck_assert_uint_eq(changes, 1);
    ck_assert(llabs(prefill[0] - 500000) <= 1 && llabs(prefill[1] - 1500000) <= 1);
    ck_assert(llabs(decode[0] - 83333) <= 1); /* 0.5 ms over 6 decode passes */

    /* stage 1 gets faster (EWMA: several frames to believe it): the cut comes back, never below 2 */
    for (int k = 0; k < 30; k++) {
        j = frame(split, 8, 3e6, 0.2e6, 0, 0);
        vh_split_scheduler_observe(&s, &j);
        split = vh_split_scheduler_choose(&s, none);
    }
    ck_assert_uint_eq(split, 2);
    vh_split_scheduler_destroy(&s);
}
END_TEST

START_TEST(test_scheduler_small_gain_and_backlog)
{
    vh_plan plan = zone_plan(10, 5, 3, 7);
    vh_split_scheduler s;
    vh_split_scheduler_init(&s, &plan, 7, NULL);
    /* balanced at 5 but for a 1% edge on stage 1: no move for it */
    vh_frame_job j = frame(5, 10, 1.0e6, 0.99e6, 0, 0);
    vh_split_scheduler_observe(&s, &j);
    const uint32_t none[2] = {0, 0}, stage1_behind[2] = {0, 3}, stage0_behind[2] = {3, 0};
    ck_assert_uint_eq(vh_split_scheduler_choose(&s, none), 5);
    /* a tie: frames piling up before stage 1 move one block to stage 0, and back */
    ck_assert_uint_eq(vh_split_scheduler_choose(&s, stage1_behind), 6);
    ck_assert_uint_eq(vh_split_scheduler_choose(&s, stage0_behind), 5);
    vh_split_scheduler_destroy(&s);

    /* an explicit split without a zone never moves */
    plan.split_min = plan.split_max = 5;
    vh_split_scheduler_init(&s, &plan, 7, NULL);
    j = frame(5, 10, 1e6, 9e6, 0, 0);
    vh_split_scheduler_observe(&s, &j);
    ck_assert_uint_eq(vh_split_scheduler_choose(&s, stage1_behind), 5);
    vh_split_scheduler_destroy(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("split_scheduler");
    TCase *tc = tcase_create("split");
    tcase_add_test(tc, test_balance_at_the_crossing);
    tcase_add_test(tc, test_scheduler_moves_towards_balance);
    tcase_add_test(tc, test_scheduler_small_gain_and_backlog);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
