/* optim_int.h — what the files of optim/ share. */
#ifndef TL_OPTIM_INT_H
#define TL_OPTIM_INT_H

#include "tpuloop/optim.h"

/* tl_lr_schedule_validate with messages prefixed by who ("Adam", or
 * "learning rate" for a schedule on its own). */
tl_status tl_lr_schedule_check(const tl_lr_schedule *s, const char *who);

/*
 * The float32 update kernels of apply.c, shared by the dense optimizers
 * (tl_optimizer_apply) and the embedding rules (emb_rules.c), so each rule
 * exists once. Each updates p[0..n) and its slots in place from g[0..n);
 * no pointer may overlap another. The moving averages are TF's
 * x += (y - x) * (1 - beta), hence the one_minus_* arguments.
 *
 *   sgd         p -= g*lr
 *   momentum    a = a*mu + g; p -= a*lr
 *   nesterov    a = a*mu + g; p -= g*lr + a*(mu*lr)
 *   adagrad     acc += g^2; p -= g*lr/sqrt(acc)
 *   adam        m, v moving averages of g, g^2; p -= m*lr_t/(sqrt(v) + eps)
 *   rmsprop     ms moving average of g^2; mom = mom*mu + g*lr/sqrt(ms + eps); p -= mom
 *   centered    as rmsprop, mg moving average of g, sqrt((ms - mg^2) + eps)
 */
void tl_optim_sgd_f(float *restrict p, const float *restrict g, float lr, int64_t n);
void tl_optim_momentum_f(float *restrict p, const float *restrict g, float *restrict a, float lr, float mu, int64_t n);
void tl_optim_nesterov_f(float *restrict p, const float *restrict g, float *restrict a, float lr, float mu, int64_t n);
void tl_optim_adagrad_f(float *restrict p, const float *restrict g, float *restrict acc, float lr, int64_t n);
void tl_optim_adam_f(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, float lr_t,
                     float one_minus_b1, float one_minus_b2, float eps, int64_t n);
void tl_optim_rmsprop_f(float *restrict p, const float *restrict g, float *restrict ms, float *restrict mom, float lr,
                        float one_minus_rho, float mu, float eps, int64_t n);
void tl_optim_rmsprop_centered_f(float *restrict p, const float *restrict g, float *restrict ms, float *restrict mom,
                                 float *restrict mg, float lr, float one_minus_rho, float mu, float eps, int64_t n);

#endif /* TL_OPTIM_INT_H */
