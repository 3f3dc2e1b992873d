/* train_spec_optim.c - the optimizer ("optimizer") and the learning-rate schedule ("schedule") of a
 * training spec: their shapes (validation, defaults, the API document) and the rule the schedule's
 * shape cannot say.  Part of the jansson-only training spec module (spec.h); optim.c reads the
 * defaults from these shapes. */
#include "spec/train_spec.h"

#include <stdio.h>
#include <string.h>

static const char *const sgd_v[] = {"sgd", NULL}, *const adam_v[] = {"adam", NULL};
static const sch sgd_type_s = {SCH_STR, .values = sgd_v}, adam_type_s = {SCH_STR, .values = adam_v};
static const sch lr_s = {SCH_NUM, SCH_IN_LO_OPEN(0, 10), .desc = "the base learning rate"};
static const sch momentum_s = {SCH_NUM, SCH_IN_HI_OPEN(0, 1), .dflt = "0"};
static const sch beta1_s = {SCH_NUM, SCH_IN_HI_OPEN(0, 1), .dflt = "0.9"};
static const sch beta2_s = {SCH_NUM, SCH_IN_HI_OPEN(0, 1), .dflt = "0.999"};
static const sch eps_s = {SCH_NUM, SCH_IN_LO_OPEN(0, 1), .dflt = "1e-08"};
static const sch_member sgd_m[] = {{"type", &sgd_type_s, 1}, {"lr", &lr_s, 1}, {"momentum", &momentum_s, 0}, {0}};
static const sch_member adam_m[] = {{"type", &adam_type_s, 1}, {"lr", &lr_s, 1},   {"beta1", &beta1_s, 0},
                                    {"beta2", &beta2_s, 0},    {"eps", &eps_s, 0}, {0}};
const sch train_sgd_shape = {SCH_OBJECT, .members = sgd_m, .desc = "SGD with (heavy-ball) momentum"};
const sch train_adam_shape = {SCH_OBJECT, .members = adam_m, .desc = "Adam"};
static const sch *const optim_alts[] = {&train_sgd_shape, &train_adam_shape, NULL};
const sch train_optim_shape = {SCH_ONEOF, .alts = optim_alts, .tag = "type", .desc = "the optimizer"};

static const char *const sched_v[] = {"constant", "step", "cosine", NULL};
static const sch sched_type_s = {SCH_STR, .values = sched_v, .dflt = "\"constant\""};
static const sch warmup_s = {SCH_INT, SCH_MIN(0), .dflt = "0", .desc = "steps of linear warm-up from lr/warmup_steps to lr"};
static const sch step_size_s = {SCH_INT, SCH_MIN(1), .desc = "steps between decays (a step schedule: required)"};
static const sch gamma_s = {SCH_NUM, SCH_IN_LO_OPEN(0, 1), .dflt = "0.1", .desc = "the factor of each decay (step)"};
static const sch min_lr_s = {SCH_NUM, SCH_IN(0, 10), .dflt = "0", .desc = "where cosine ends"};
static const sch_member sched_m[] = {{"type", &sched_type_s, 0}, {"warmup_steps", &warmup_s, 0}, {"step_size", &step_size_s, 0},
                                     {"gamma", &gamma_s, 0},     {"min_lr", &min_lr_s, 0},       {0}};
const sch train_schedule_shape = {SCH_OBJECT, .members = sched_m,
                                  .desc = "the learning-rate schedule (absent: constant); a step schedule needs step_size"};

int train_schedule_rules(const json_t *s, const char *prefix, char *field, size_t fl, char *msg, size_t ml)
{
    const char *t = json_string_value(json_object_get(s, "type"));
    if (t && !strcmp(t, "step") && !json_object_get(s, "step_size")) {
        snprintf(field, fl, "%s.step_size", prefix);
        snprintf(msg, ml, "is required for a step schedule");
        return -1;
    }
    return 0;
}
