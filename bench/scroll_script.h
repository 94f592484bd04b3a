/*
 * bench/scroll_script.h: the scroll benchmark's scripted session (bench/scroll.c), shared
 * with bench/animation_table.c so that both scroll the same way. Over ROWS rows with
 * VISIBLE on screen, one frame per call: a slow scroll over the first rows, a fling that
 * starts at 10 rows per frame and decelerates to a stop near row 60% of the table, a
 * pause, a scroll back up over 40 rows, and a jump to the end, held until drawn.
 */
#ifndef PXL_BENCH_SCROLL_SCRIPT_H
#define PXL_BENCH_SCROLL_SCRIPT_H

#include <math.h>

enum step_kind { MOVE, FLING, HOLD, JUMP };

struct step {
  const char *name;
  enum step_kind kind;
  double target;     /* MOVE, FLING, JUMP: the top row to reach */
  double speed;      /* MOVE: rows per frame; FLING: the top speed */
  int min_ms;        /* HOLD: at least this long, and until the screen is drawn ... */
  int max_ms;        /* ... or this long */
};

enum { STEP_SLOW, STEP_SETTLE, STEP_FLING, STEP_STOP, STEP_BACK, STEP_JUMP, STEP_FINAL, STEPS };

/* Where a session is: its steps, the one under way, the top row's position. */
struct scroll_script {
  struct step steps[STEPS];
  int visible;
  int step;
  double position, step_started;
};

static void scroll_script_start(struct scroll_script *s, int rows, int visible, double now) {
  double last = rows - visible;
  double fling_to = floor(last * 0.6);
  s->steps[STEP_SLOW] = (struct step){"slow scroll", MOVE, fmin(32, last), 0.125, 0, 0};
  s->steps[STEP_SETTLE] = (struct step){"settle", HOLD, 0, 0, 500, 500};
  s->steps[STEP_FLING] = (struct step){"fling", FLING, fling_to, 10, 0, 0};
  s->steps[STEP_STOP] = (struct step){"stop", HOLD, 0, 0, 1500, 1500};
  s->steps[STEP_BACK] = (struct step){"scroll back", MOVE, fmax(0, fling_to - 40), 0.5, 0, 0};
  s->steps[STEP_JUMP] = (struct step){"jump to end", JUMP, last, 0, 0, 0};
  s->steps[STEP_FINAL] = (struct step){"final screen", HOLD, 0, 0, 1000, 20000};
  s->visible = visible;
  s->step = 0;
  s->position = 0;
  s->step_started = now;
}

/* Advances the script by one frame at now: view(ctx, top, direction) moves the screen
 * (direction 1 down, -1 up, 0 still), drawn(ctx) tells how many visible rows are drawn
 * (a hold ends early only with all of them); 0 when the session has ended. */
static int scroll_script_frame(struct scroll_script *sc, double now, void (*view)(void *, int, int),
                               int (*drawn)(void *), void *ctx) {
  while (sc->step < STEPS) {
    const struct step *s = &sc->steps[sc->step];
    int done = 0, direction = 0;
    if (s->kind == MOVE || s->kind == FLING) {
      double delta = s->target - sc->position;
      double speed = s->speed;
      if (s->kind == FLING) speed = fmax(0.25, fmin(s->speed, fabs(delta) * 0.04));
      direction = delta > 0 ? 1 : delta < 0 ? -1 : 0;
      if (fabs(delta) <= speed) {
        sc->position = s->target;
        done = 1;
      } else {
        sc->position += direction * speed;
      }
    } else if (s->kind == JUMP) {
      direction = s->target > sc->position ? 1 : -1;
      sc->position = s->target;
      done = 1;
    } else {
      double held = now - sc->step_started;
      done = held >= s->min_ms && (drawn(ctx) == sc->visible || held >= s->max_ms);
    }
    view(ctx, (int)floor(sc->position), direction);
    if (!done) return 1;
    sc->step++;
    sc->step_started = now;
    if (s->kind != HOLD) return 1;
  }
  return 0;
}

#endif
