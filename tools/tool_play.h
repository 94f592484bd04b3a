/* tool_play.h: `pixload play`, an animation played frame by frame (tool_play.c). */
#ifndef PIXLOAD_TOOL_PLAY_H
#define PIXLOAD_TOOL_PLAY_H

/* argv[0] is "play". Returns the exit status. */
int play(int argc, char **argv);

#endif
