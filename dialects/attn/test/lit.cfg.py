# lit configuration of the attn IR suite: FileCheck tests driven through attn-opt.
import os

import lit.formats

config.name = "attn-ir"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.attn_test_binary_dir
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in", "CMakeLists.txt"]
config.environment["PATH"] = os.pathsep.join(
    [config.attnc_bin_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
