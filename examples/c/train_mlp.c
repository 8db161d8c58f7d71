/*
 * train_mlp: a two-layer perceptron trained by gradient descent through the
 * StrideWeave C API.
 *
 *   prediction = relu(x @ w1 + b1) @ w2 + b2
 *   loss       = sum((prediction - y)^2) / samples
 *
 * The data are synthetic and made here from a fixed seed, so every run prints
 * the same numbers. The program exits non-zero unless the loss falls at least
 * tenfold, which makes it a test as well as an example.
 *
 * Things worth noticing:
 * - Matrices are stored first mode fastest (column major): element (i, j) of
 *   a (rows, cols) matrix is data[i + rows * j]. See at() below.
 * - Every op returns a new tensor that the caller releases; the runtime keeps
 *   the freed buffers for reuse, so a training loop allocates no fresh memory
 *   after its first step.
 * - Gradients accumulate in the leaves until sw_tensor_clear_grad().
 * - The update runs with grad mode off, so computing the new weights records
 *   no autograd graph, and sw_tensor_write() stores them in place.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "strideweave/strideweave.h"

enum {
  kSamples = 128,
  kInputs = 4,
  kHidden = 32,
  kOutputs = 1,
  kSteps = 1500,
  kReportEvery = 150,
};
static const double kLearningRate = 0.05;

/* Stops the program with the library's message if a call fails. */
static void check(sw_error_t* error, const char* call, int line) {
  if (!error) return;
  fprintf(stderr, "train_mlp.c:%d: %s failed: %s (%s)\n", line, call, sw_error_message(error),
          sw_error_code_name(sw_error_code(error)));
  sw_error_free(error);
  exit(1);
}
#define CHECK(call) check((call), #call, __LINE__)

/* Column-major index of element (i, j) in a matrix with `rows` rows. */
static size_t at(size_t rows, size_t i, size_t j) { return i + rows * j; }

/* A small deterministic generator (xorshift64*): uniform in [-1, 1). */
static uint64_t rng_state = 0x5eed5eed5eedull;
static float uniform(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  const uint64_t r = rng_state * 0x2545F4914F6CDD1Dull;
  return (float)((double)(r >> 40) / (double)(1ull << 23) - 1.0);
}

/* An f32 tensor of `rank` modes holding a copy of `data`. */
static sw_tensor_t* tensor_from(sw_runtime_t* rt, const int64_t* extents, size_t rank, const float* data) {
  sw_tensor_t* t = NULL;
  CHECK(sw_tensor_from_data(rt, SW_DTYPE_F32, extents, rank, data, &t));
  return t;
}

/* A trainable parameter: uniform in [-scale, scale), requiring gradients. */
static sw_tensor_t* parameter(sw_runtime_t* rt, const int64_t* extents, size_t rank, float scale) {
  size_t count = 1;
  for (size_t i = 0; i < rank; ++i) count *= (size_t)extents[i];
  float* values = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) values[i] = scale * uniform();
  sw_tensor_t* p = tensor_from(rt, extents, rank, values);
  free(values);
  CHECK(sw_tensor_set_requires_grad(p, true));
  return p;
}

/* The forward pass; returns the loss, a one-element tensor. */
static sw_tensor_t* forward_loss(sw_tensor_t* x, sw_tensor_t* neg_y, sw_tensor_t* w1, sw_tensor_t* b1,
                                 sw_tensor_t* w2, sw_tensor_t* b2) {
  sw_tensor_t *xw1, *pre, *hidden, *hw2, *prediction, *error, *squared, *total, *loss;
  CHECK(sw_matmul(x, w1, &xw1));            /* (samples, hidden) */
  CHECK(sw_add(xw1, b1, &pre));             /* b1 (hidden) broadcasts over the rows */
  CHECK(sw_relu(pre, &hidden));
  CHECK(sw_matmul(hidden, w2, &hw2));       /* (samples, outputs) */
  CHECK(sw_add(hw2, b2, &prediction));
  CHECK(sw_add(prediction, neg_y, &error)); /* prediction - y */
  CHECK(sw_elementwise_mul(error, error, &squared));
  CHECK(sw_reduce_sum(squared, NULL, 0, false, &total));
  CHECK(sw_mul_scalar(total, 1.0 / kSamples, &loss));
  /* The graph keeps what backward needs; our references can go. */
  sw_tensor_release(xw1);
  sw_tensor_release(pre);
  sw_tensor_release(hidden);
  sw_tensor_release(hw2);
  sw_tensor_release(prediction);
  sw_tensor_release(error);
  sw_tensor_release(squared);
  sw_tensor_release(total);
  return loss;
}

static float read_scalar(const sw_tensor_t* t) {
  float value = 0;
  CHECK(sw_tensor_read(t, &value, sizeof value));
  return value;
}

/* param -= learning_rate * grad, then forget the gradient. Call with grad
 * mode off: the arithmetic is not part of the model. */
static void sgd_update(sw_tensor_t* param, double learning_rate) {
  sw_tensor_t *grad = NULL, *step = NULL, *updated = NULL;
  CHECK(sw_tensor_grad(param, &grad));
  if (!grad) return; /* the parameter did not take part in the loss */
  CHECK(sw_mul_scalar(grad, -learning_rate, &step));
  CHECK(sw_add(param, step, &updated));

  int64_t count = 0;
  CHECK(sw_tensor_numel(param, &count));
  const size_t bytes = (size_t)count * sizeof(float);
  float* values = malloc(bytes);
  CHECK(sw_tensor_read(updated, values, bytes));
  CHECK(sw_tensor_write(param, values, bytes));
  free(values);

  CHECK(sw_tensor_clear_grad(param));
  sw_tensor_release(updated);
  sw_tensor_release(step);
  sw_tensor_release(grad);
}

int main(void) {
  sw_runtime_t* rt = NULL;
  CHECK(sw_runtime_create(NULL, &rt)); /* default: one compute thread per core */

  /* Synthetic regression: y = sin(2 x0) + x1 x2 - 0.5 x3 on x in [-1, 1)^4. */
  static float x_data[kSamples * kInputs], neg_y_data[kSamples * kOutputs];
  for (size_t i = 0; i < kSamples; ++i) {
    float x[kInputs];
    for (size_t j = 0; j < kInputs; ++j) x_data[at(kSamples, i, j)] = x[j] = uniform();
    const float y = sinf(2 * x[0]) + x[1] * x[2] - 0.5f * x[3];
    neg_y_data[at(kSamples, i, 0)] = -y; /* the loss needs prediction - y, and there is no subtract */
  }
  const int64_t x_shape[2] = {kSamples, kInputs}, y_shape[2] = {kSamples, kOutputs};
  sw_tensor_t* x = tensor_from(rt, x_shape, 2, x_data);
  sw_tensor_t* neg_y = tensor_from(rt, y_shape, 2, neg_y_data);

  const int64_t w1_shape[2] = {kInputs, kHidden}, b1_shape[1] = {kHidden};
  const int64_t w2_shape[2] = {kHidden, kOutputs}, b2_shape[1] = {kOutputs};
  sw_tensor_t* w1 = parameter(rt, w1_shape, 2, 1.0f / sqrtf(kInputs));
  sw_tensor_t* b1 = parameter(rt, b1_shape, 1, 0.1f);
  sw_tensor_t* w2 = parameter(rt, w2_shape, 2, 1.0f / sqrtf(kHidden));
  sw_tensor_t* b2 = parameter(rt, b2_shape, 1, 0.1f);
  sw_tensor_t* params[] = {w1, b1, w2, b2};

  float first_loss = 0, last_loss = 0;
  for (int step = 0; step <= kSteps; ++step) {
    sw_tensor_t* loss = forward_loss(x, neg_y, w1, b1, w2, b2);
    last_loss = read_scalar(loss);
    if (step == 0) first_loss = last_loss;
    if (step % kReportEvery == 0) printf("step %4d  loss %.6f\n", step, last_loss);
    if (step < kSteps) {
      CHECK(sw_backward(loss, NULL, false)); /* fills the parameters' grads */
      const bool previous = sw_set_grad_enabled(false);
      for (size_t p = 0; p < sizeof params / sizeof params[0]; ++p) sgd_update(params[p], kLearningRate);
      sw_set_grad_enabled(previous);
    }
    sw_tensor_release(loss);
  }

  const float factor = first_loss / last_loss;
  printf("final loss %.6f (from %.6f, %.1fx lower)\n", last_loss, first_loss, factor);

  for (size_t p = 0; p < sizeof params / sizeof params[0]; ++p) sw_tensor_release(params[p]);
  sw_tensor_release(neg_y);
  sw_tensor_release(x);
  sw_runtime_release(rt);

  if (!(factor >= 10.0f)) {
    fprintf(stderr, "train_mlp: the loss fell only %.1fx, expected at least 10x\n", factor);
    return 1;
  }
  return 0;
}
