/* The command table (analyzer/commands.c): each entry runs one way, every command is found by
 * its name and answers --help through the table, `help CMD` says the same, and the command
 * list of `gmshim --help` is the table's. */
#include "commands.h"
#include "suites.h"
#include "test_analyzer_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_every_entry_is_named_described_and_runs_one_way)
{
    ck_assert_msg(cmd_count >= 9, "%zu commands", cmd_count);
    for (size_t i = 0; i < cmd_count; i++) {
        const cmd_t *c = &cmd_table[i];
        ck_assert_msg(c->name && *c->name && c->summary && *c->summary, "entry %zu lacks a name or a summary", i);
        ck_assert_msg(cmd_find(c->name) == c, "%s is not found by its name", c->name);
        if (!strcmp(c->name, "help"))
            continue;
        int ways = (c->main != NULL) + (c->go != NULL) + (c->raw != NULL) + (c->text != NULL);
        ck_assert_msg(ways == 1, "%s runs %d ways (main, go, raw, text)", c->name, ways);
        ck_assert_msg(c->main || c->usage, "%s has neither a frame of its own nor a usage text", c->name);
        ck_assert_msg(!c->text == !c->json, "%s has text without JSON or JSON without text", c->name);
        ck_assert_msg(c->main || !c->usage || !strncmp(c->usage, "usage: gmshim ", 14), "%s's usage: %.40s", c->name,
                      c->usage);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(cmd_table[j].name, c->name), "%s is in the table twice", c->name);
    }
    ck_assert_msg(cmd_find("nosuch") == NULL && cmd_find("") == NULL, "an unknown name finds a command");
}
END_TEST

START_TEST(test_each_command_answers_help_as_its_entry_says)
{
    char *list;
    int rc = gm(&list, "--help", NULL);
    ck_assert_msg(rc == 0, "gmshim --help exited %d", rc);
    for (size_t i = 0; i < cmd_count; i++) {
        const cmd_t *c = &cmd_table[i];
        char line[256];
        snprintf(line, sizeof line, "  %-10s %s\n", c->name, c->summary);
        ck_assert_msg(strstr(list, line), "gmshim --help lacks the line of %s:\n%s", c->name, list);
        if (!strcmp(c->name, "help"))
            continue;
        char *own, *via_help;
        int rc1 = gm(&own, c->name, "--help", NULL);
        int rc2 = gm(&via_help, "help", c->name, NULL);
        char head[64];
        snprintf(head, sizeof head, "usage: gmshim %s", c->name);
        ck_assert_msg(rc1 == 0 && rc2 == 0 && !strncmp(own, head, strlen(head)) && !strcmp(own, via_help),
                      "%s --help (%d) and help %s (%d) differ or do not start with its usage:\n%s\n---\n%s", c->name,
                      rc1, c->name, rc2, own, via_help);
        if (c->usage)
            ck_assert_msg(!strcmp(own, c->usage), "%s --help is not its entry's usage text", c->name);
        free(own);
        free(via_help);
    }
    free(list);
}
END_TEST

Suite *analyzer_commands_suite(void)
{
    Suite *s = suite_create("analyzer_commands");
    TCase *tc = tcase_create("commands");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_every_entry_is_named_described_and_runs_one_way);
    tcase_add_test(tc, test_each_command_answers_help_as_its_entry_says);
    suite_add_tcase(s, tc);
    return s;
}
