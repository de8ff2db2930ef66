/* `gmshim export`: a log for Perfetto or PyTorch's memory_viz (the writers below it). */
#ifndef GM_EXPORT_H
#define GM_EXPORT_H

int cmd_export(int argc, char **argv);

#endif
