/* solve.h - what the solver hands to the JSON writers (result.c,
 * schedule.c): the views, every candidate plan (one per algorithm and
 * graph variant weighed) and its replay, and the search's figures.
 *
 * Owns nothing itself; place.c creates and releases the candidates. */
#ifndef GANTRY_PLACE_SOLVE_H
#define GANTRY_PLACE_SOLVE_H

#include <jansson.h>

#include "workers/place/algo.h"
#include "workers/place/sim.h"
#include "workers/place/view.h"

typedef struct place_candidate {
    const char *name;
    const char *variant; /* the graph variant it was placed on (variant.h) */
    int view;            /* index of that variant's view in the solver's views */
    int rank;            /* the algorithm's place: requested ones in request order, then the added ones */
    int requested;       /* 0: the solver added it (single, m-topo), shown only when feasible */
    int simulated;       /* sim holds a replay (on the view) */
    int feasible;
    double placement_ms, simulation_ms;
    double unfused_makespan_us; /* with fusion: the replay of the expanded plan on the original ops; else -1 */
    char reason[512];
    place_plan *plan;     /* on the view */
    place_plan *expanded; /* on the original ops */
    place_sim_result sim;
} place_candidate;

/* How the solver searched: the whole solve's time and the variants whose views it placed. */
typedef struct place_search {
    double search_ms;
    int variants; /* views placed on */
    int forced;   /* the spec chose the variant */
} place_search;

/* Result JSON (docs/placement.md "Result"): one candidate per algorithm, its best variant's
 * figures with every variant it was placed on; v is best's view; `trace` is the best plan's
 * replay with PLACE_SIM_MEMORY, or NULL when the schedule is omitted. */
json_t *place_result_json(const place_view *v, const place_candidate *c, int n, const place_candidate *best,
                          const place_sim_result *trace, double lower_bound_us, const place_search *s);

/* result.plan.schedule for the dashboard's Gantt view (schedule.c). */
json_t *place_schedule_json(const place_view *v, const place_plan *expanded, const place_sim_result *trace);

/* Largest graph whose schedule is included in a result. */
#define PLACE_SCHEDULE_MAX_OPS 100000
/* Memory points per device in a schedule, at most. */
#define PLACE_SCHEDULE_MEM_POINTS 2000

/* Microseconds and milliseconds to three decimals: enough, and short. */
json_t *place_jreal(double x);

#endif
