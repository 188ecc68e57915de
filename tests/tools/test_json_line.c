/* tools/json_line.c, the tools' JSON numbers: every double printed reads back (strtod) as the same
 * double, with no shorter "%.Ng" form that would, over seeded random bit patterns of every exponent
 * and the edge cases (zeros, subnormals, the extremes, integers past 2^53); NaN and infinities
 * print null; a whole value prints as jansson's
 * own compact dump wherever it has no reals, and reads back equal where it has. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json_line.h"
#include "test_support.h"

static uint64_t splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int same_bits(double a, double b)
{
    return !memcmp(&a, &b, sizeof a);
}

/* The significant digits of a printed number (its mantissa's digits, leading zeros not counted). */
static int significant_digits(const char *s)
{
    int n = 0, started = 0, trailing_zeros = 0;
    for (; *s && *s != 'e' && *s != 'E'; s++) {
        if (*s < '0' || *s > '9') continue;
        if (*s != '0') started = 1;
        if (!started) continue;
        n++;
        trailing_zeros = *s == '0' ? trailing_zeros + 1 : 0;
    }
    return n - trailing_zeros > 0 ? n - trailing_zeros : 1;
}

/* d printed: reads back as d, and no form with fewer significant digits does (%.Ne: N+1 digits). */
static void check_shortest(double d)
{
    char out[VH_JSON_NUMBER_SIZE];
    vh_json_format_double(d, out);
    char *end;
    const double back = strtod(out, &end);
    ck_assert_msg(*end == '\0' && same_bits(back, d), "%.17g printed as %s, reads back as %.17g", d, out, back);
    ck_assert_msg(strpbrk(out, ".eE") != NULL, "%s would read as an integer", out);
    const int digits = significant_digits(out);
    for (int shorter = 1; shorter < digits; shorter++) {
        char alt[64];
        snprintf(alt, sizeof alt, "%.*e", shorter - 1, d);
        ck_assert_msg(strtod(alt, NULL) != d, "%.17g printed as %s (%d digits), but %s reads back too", d, out, digits,
                      alt);
    }
}

START_TEST(test_known_values)
{
    static const struct {
        double d;
        const char *text;
    } known[] = {
        {41.430175, "41.430175"}, {0.1, "0.1"}, {1.0, "1.0"}, {-0.0, "-0.0"}, {0.0, "0.0"}, {100.0, "100.0"},
        {1e21, "1e+21"}, {1e15, "1000000000000000.0"}, {1.5e10, "15000000000.0"}, {1e16, "1e+16"}, {1e-7, "1e-07"}, {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
        {2.2250738585072014e-308, "2.2250738585072014e-308"}, {0.30000000000000004, "0.30000000000000004"},
        {9007199254740993.0, "9007199254740992.0"}, {-1.5, "-1.5"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        char out[VH_JSON_NUMBER_SIZE];
        ck_assert_str_eq(vh_json_format_double(known[i].d, out), known[i].text);
        check_shortest(known[i].d);
    }
    char out[VH_JSON_NUMBER_SIZE];
    ck_assert_str_eq(vh_json_format_double(NAN, out), "null");
    ck_assert_str_eq(vh_json_format_double(INFINITY, out), "null");
    ck_assert_str_eq(vh_json_format_double(-INFINITY, out), "null");
    const double edges[] = {DBL_MIN, DBL_MAX, DBL_TRUE_MIN, -DBL_TRUE_MIN, DBL_EPSILON, 1.0 + DBL_EPSILON,
                            nextafter(1.0, 0.0), 4503599627370496.5, 1e16, 1e15 + 0.3, 123456789.0, 1e-5};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) check_shortest(edges[i]);
}
END_TEST

START_TEST(test_random_doubles)
{
    uint64_t state = 20261204;
    for (int i = 0; i < 40000; i++) {
        uint64_t bits = splitmix(&state);
        double d;
        if (i % 2) { /* every exponent: random bit patterns */
            memcpy(&d, &bits, sizeof d);
            if (!isfinite(d)) continue;
        } else { /* values of everyday sizes, as timings and actions are */
            d = ((double)(bits >> 11) / 9007199254740992.0 - 0.5) * pow(10.0, (double)(int)(bits % 13) - 6);
        }
        check_shortest(d);
    }
}
END_TEST

START_TEST(test_whole_values)
{
    /* no reals: exactly jansson's own compact text (key order, escapes, nesting) */
    json_t *v = json_pack("{s:i, s:s, s:[i, b, n, {s:s}], s:{}, s:[]}", "zeta", -3, "text", "a \"q\"\n\\ \xc3\xa9\x01",
                          "list", 1, 1, "k", "v", "empty", "none");
    char *ours = vh_json_dumps(v), *theirs = json_dumps(v, JSON_COMPACT);
    ck_assert_str_eq(ours, theirs);
    free(ours);
    free(theirs);
    json_decref(v);
    /* reals: read back equal */
    v = json_pack("{s:f, s:[f, f, f]}", "ms", 41.430175, "xs", 0.1, -2.5e-300, 1e300);
    ours = vh_json_dumps(v);
    ck_assert_str_eq(ours, "{\"ms\":41.430175,\"xs\":[0.1,-2.5e-300,1e+300]}");
    json_t *back = json_loads(ours, 0, NULL);
    ck_assert(back && json_equal(back, v));
    json_decref(back);
    free(ours);
    json_decref(v);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("json_line");
    TCase *tc = tcase_create("numbers");
    tcase_add_test(tc, test_known_values);
    tcase_add_test(tc, test_random_doubles);
    tcase_add_test(tc, test_whole_values);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
