/* gmshim's version: the library's, the CLI's and the wheel's (scripts/gmshim_wheel.py reads it). */
#ifndef GM_VERSION_H
#define GM_VERSION_H

#define GMSHIM_VERSION_STRING "0.1.0"

#endif
