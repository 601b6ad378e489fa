// Help, completion and man pages generated from the CLI11 definitions, so they never
// drift from the flags the binary takes.
#include "cli/cli_docs.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>

namespace gantry {

namespace {

// Examples shown under `gantry CMD --help` and in the man pages.
const std::map<std::string, std::string>& Examples() {
  static const std::map<std::string, std::string> kExamples = {
      {"submit",
       "  gantry submit -g 2 -t A100-80GB --estimate 2h -- python train.py --lr 0.1\n"
       "  gantry submit --gpu-fraction 0.25 --sharing mps --estimate 8h -- python serve.py\n"
       "  gantry submit -g 1 --array 0-99%8 -- sh -c 'python sweep.py --trial $GANTRY_ARRAY_TASK_ID'\n"
       "  gantry submit -g 4 -d afterok:12 --mail-type END,FAIL --mail-user ana@example.org -- ./train.sh\n"
       "  gantry submit -g 1 --hold-gpus 2h          # a GPU for interactive work, no command\n"
       "  gantry submit --jobs-file jobs.txt --dry-run"},
      {"run",
       "  gantry run -g 1 -t T4 -- python eval.py     # prints its output, exits with its code\n"
       "  gantry run --gpu-fraction 0.5 --time-limit 10 -- nvidia-smi"},
      {"jobs",
       "  gantry jobs --state active\n"
       "  gantry jobs --user ana --since 2d --until '2026-11-26 18:00'\n"
       "  gantry jobs -o json --state failed --limit 20"},
      {"job", "  gantry job 12\n  gantry job 12_4 --utc"},
      {"queue", "  gantry queue\n  gantry queue --explain 12"},
      {"logs", "  gantry logs 12\n  gantry logs 12_4 -f --stderr"},
      {"exec",
       "  gantry exec 12 -- nvidia-smi              # in job 12's allocation, as the job\n"
       "  gantry exec 12 -t -- python -i            # on a terminal\n"
       "  gantry exec 12                            # a login shell there"},
      {"shell",
       "  gantry shell -g 1 -t A100-80GB             # salloc + srun --pty bash: GPUs, then a shell on them\n"
       "  gantry shell -g 2 --time-limit 4h -- python   # runs that instead of the shell"},
      {"attach", "  gantry attach 12          # its output as it comes; Ctrl-C leaves it running"},
      {"wait", "  gantry wait 12 13 && echo all succeeded\n  gantry wait 12 --timeout 1h"},
      {"cancel", "  gantry cancel 12          # a job, or every task of array 12\n  gantry cancel 12_7"},
      {"hold", "  gantry hold 12 13\n  gantry release 12 13"},
      {"release", "  gantry release 12"},
      {"update", "  gantry update 12 --time-limit 4h -p high\n  gantry update 12 --dependency afterany:11"},
      {"usage", "  gantry usage --by team\n  gantry usage --from 2026-11-01 --by gpu_type"},
      {"report", "  gantry report --month 2026-11 --format csv > bill.csv"},
      {"server",
       "  gantry server --standalone                     # this machine's GPUs (fake ones without)\n"
       "  gantry server --config /etc/gantry --listen 0.0.0.0:8080 --public-url https://gantry.example.org"},
      {"agent",
       "  gantry agent --server https://gantry:8080 --token-file /etc/gantry/agent.token --data-dir /var/lib/gantry"},
      {"sim",
       "  gantry sim --cluster examples/clusters/mixed-64x8.yaml --trace trace.csv --trace-format csv --compare "
       "fifo,gantry"},
      {"login", "  gantry login --server https://gantry.example.org   # single sign-on (the device flow)"},
      {"tokens", "  gantry tokens list\n  gantry tokens revoke s-4f0c2a9e1b3d5c7f"},
      {"login-node", "  gantry login-node --server https://gantry.example.org --token-file /etc/gantry/login1.token"},
      {"completion", "  source <(gantry completion bash)\n  gantry completion zsh > \"${fpath[1]}/_gantry\""},
      {"man", "  gantry man submit | man -l -\n  gantry man --dir /usr/local/share/man/man1"},
      {"help", "  gantry help submit"},
  };
  return kExamples;
}

std::vector<const CLI::App*> Commands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* c) { return !c->get_group().empty(); });
}

const CLI::App* FindCommand(const CLI::App& app, const std::string& name) {
  for (const CLI::App* c : Commands(app)) {
    if (c->get_name() == name) return c;
  }
  return nullptr;
}

// "-g, --gpus" and whether it takes a value.
struct OptionNames {
  std::vector<std::string> names;
  bool takes_value = false;
};

std::vector<OptionNames> OptionsOf(const CLI::App& command) {
  std::vector<OptionNames> out;
  for (const CLI::Option* o : command.get_options()) {
    if (o->get_positional() && o->get_lnames().empty() && o->get_snames().empty()) continue;
    OptionNames n;
    for (const std::string& s : o->get_snames()) n.names.push_back("-" + s);
    for (const std::string& l : o->get_lnames()) n.names.push_back("--" + l);
    n.takes_value = o->get_expected_max() != 0;  // flags expect no value
    if (!n.names.empty()) out.push_back(std::move(n));
  }
  return out;
}

// roff text: backslashes, hyphens and a leading dot or quote escaped.
std::string Roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

void SetExamples(CLI::App& app) {
  for (CLI::App* c : app.get_subcommands([](CLI::App* c) { return !c->get_group().empty(); })) {
    auto it = Examples().find(c->get_name());
    if (it != Examples().end()) c->footer("\nExamples:\n" + it->second);
  }
  app.footer("\nRun `gantry help COMMAND` (or `gantry COMMAND --help`) for a command's options and examples.");
}

}  // namespace

std::string CompletionScript(const CLI::App& app, bool zsh) {
  std::string names;
  std::string cases;
  for (const CLI::App* c : Commands(app)) {
    names += (names.empty() ? "" : " ") + c->get_name();
    std::string words, valued;
    for (const OptionNames& o : OptionsOf(*c)) {
      for (const std::string& n : o.names) {
        words += (words.empty() ? "" : " ") + n;
        if (o.takes_value) valued += (valued.empty() ? "" : "|") + n;
      }
    }
    cases += fmt::format("    {}) opts=\"{}\"; valued=\"{}\" ;;\n", c->get_name(), words, valued);
  }
  std::string script = fmt::format(
      R"(# gantry completion ({}); generated by `gantry completion`.
_gantry() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" cmd="" i opts="" valued=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    [[ "${{COMP_WORDS[i]}}" == "--" ]] && return 0  # the job's command: the shell's own completion
    if [[ -z "$cmd" && "${{COMP_WORDS[i]}}" != -* ]]; then cmd="${{COMP_WORDS[i]}}"; fi
  done
  if [[ -z "$cmd" ]]; then
    COMPREPLY=($(compgen -W "{}" -- "$cur"))
    return 0
  fi
  case "$cmd" in
{}  esac
  if [[ "$cmd" == help && "$prev" == help ]]; then
    COMPREPLY=($(compgen -W "{}" -- "$cur"))
  elif [[ -n "$valued" && "|$valued|" == *"|$prev|"* ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  elif [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  fi
  return 0
}}
complete -o default -F _gantry gantry
)",
      zsh ? "zsh, through bashcompinit" : "bash", names, cases, names);
  if (!zsh) return script;
  return "#compdef gantry\nautoload -U +X bashcompinit && bashcompinit\n" + script;
}

std::string ManPage(const CLI::App& app, const CLI::App* command) {
  std::string title = command ? "gantry-" + command->get_name() : "gantry";
  std::string upper = title;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string page = fmt::format(".TH {} 1 \"\" \"{}\" \"Gantry manual\"\n.SH NAME\n{} \\- {}\n", upper, kVersionLine,
                                 Roff(title), Roff(command ? command->get_description() : app.get_description()));
  if (!command) {
    page += ".SH SYNOPSIS\n.B gantry\n\\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n.SH COMMANDS\n";
    for (const CLI::App* c : Commands(app)) {
      page += fmt::format(".TP\n.B {}\n{}\n", Roff(c->get_name()), Roff(c->get_description()));
    }
    page += ".SH SEE ALSO\n";
    std::string sep;
    for (const CLI::App* c : Commands(app)) {
      page += fmt::format("{}.BR gantry\\-{} (1)", sep, Roff(c->get_name()));
      sep = ",\n";
    }
    return page + "\n";
  }
  page += fmt::format(".SH SYNOPSIS\n.B gantry {}\n[\\fIOPTIONS\\fR]", Roff(command->get_name()));
  for (const CLI::Option* o : command->get_options()) {
    if (o->get_positional() && o->get_lnames().empty()) page += " [\\fI" + Roff(o->get_name()) + "\\fR...]";
  }
  page += "\n.SH OPTIONS\n";
  for (const CLI::Option* o : command->get_options()) {
    std::string names;
    for (const std::string& s : o->get_snames()) names += (names.empty() ? "" : ", ") + ("\\fB\\-" + Roff(s) + "\\fR");
    for (const std::string& l : o->get_lnames()) {
      names += (names.empty() ? "" : ", ") + ("\\fB\\-\\-" + Roff(l) + "\\fR");
    }
    if (names.empty()) names = "\\fI" + Roff(o->get_name()) + "\\fR";
    if (o->get_expected_max() != 0 && !o->get_lnames().empty()) names += " \\fI" + Roff(o->get_type_name()) + "\\fR";
    page += fmt::format(".TP\n{}\n{}\n", names, Roff(o->get_description()));
  }
  auto it = Examples().find(command->get_name());
  if (it != Examples().end()) page += ".SH EXAMPLES\n.nf\n" + Roff(it->second) + "\n.fi\n";
  return page + ".SH SEE ALSO\n.BR gantry (1)\n";
}

std::function<int()> AddCliDocs(CLI::App& app, std::ostream& out, std::ostream& err) {
  auto chosen = std::make_shared<std::function<int()>>();
  auto topic = std::make_shared<std::string>();
  CLI::App* help = app.add_subcommand("help", "Show the options and examples of a command");
  help->add_option("command", *topic, "The command (none: the list of commands)");
  help->callback([&app, &out, &err, topic, chosen] {
    *chosen = [&app, &out, &err, topic] {
      if (topic->empty()) {  // app.help() would describe `help` itself, the command parsed
        out << app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
        return 0;
      }
      const CLI::App* c = FindCommand(app, *topic);
      if (!c) {
        err << "gantry: help: no command '" << *topic << "' (gantry help lists them)\n";
        return 2;
      }
      out << c->help(app.get_name());
      return 0;
    };
  });
  auto shell = std::make_shared<std::string>();
  CLI::App* completion = app.add_subcommand("completion", "Print the shell completion script (bash or zsh)");
  completion->add_option("shell", *shell, "bash or zsh")->required()->check(CLI::IsMember({"bash", "zsh"}));
  completion->callback([&app, &out, shell, chosen] {
    *chosen = [&app, &out, shell] {
      out << CompletionScript(app, *shell == "zsh");
      return 0;
    };
  });
  auto man_topic = std::make_shared<std::string>();
  auto man_dir = std::make_shared<std::string>();
  CLI::App* man = app.add_subcommand("man", "Print a man page (gantry, or one command's), or write them all");
  man->add_option("command", *man_topic, "The command (none: gantry(1))");
  man->add_option("--dir", *man_dir, "Write gantry.1 and gantry-COMMAND.1 for every command here");
  man->callback([&app, &out, &err, man_topic, man_dir, chosen] {
    *chosen = [&app, &out, &err, man_topic, man_dir]() -> int {
      if (!man_dir->empty()) {
        std::error_code ec;
        std::filesystem::create_directories(*man_dir, ec);
        int written = 0;
        auto write = [&](const std::string& name, const std::string& text) {
          std::ofstream f(*man_dir + "/" + name);
          f << text;
          written += f.good() ? 1 : 0;
          return f.good();
        };
        bool ok = write("gantry.1", ManPage(app, nullptr));
        for (const CLI::App* c : Commands(app)) ok = write("gantry-" + c->get_name() + ".1", ManPage(app, c)) && ok;
        if (!ok) {
          err << "gantry: man: cannot write under " << *man_dir << "\n";
          return 1;
        }
        out << "wrote " << written << " man pages to " << *man_dir << "\n";
        return 0;
      }
      const CLI::App* c = man_topic->empty() ? nullptr : FindCommand(app, *man_topic);
      if (!man_topic->empty() && !c) {
        err << "gantry: man: no command '" << *man_topic << "' (gantry help lists them)\n";
        return 2;
      }
      out << ManPage(app, c);
      return 0;
    };
  });
  SetExamples(app);
  return [chosen] { return *chosen ? (*chosen)() : -1; };
}

}  // namespace gantry
