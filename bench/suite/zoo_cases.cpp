#include "bench/suite/zoo_cases.h"

#include <map>

#include "bench/suite/process.h"

namespace mp::bench {

std::vector<ZooCase> ZooCases(const Suite& suite) {
  if (suite.smoke) return {{"mlp", "mlp.script.pt", "--batch 32"}, {"convnet", "convnet.script.pt", "--batch 16"}};
  return {{"mlp", "mlp.script.pt", "--batch 256"},
          {"gpt", "gpt.script.pt", "--batch 16"},
          {"convnet", "convnet.script.pt", "--batch 64"},
          {"branchy", "branchy.script.pt", "--batch 16"},
          {"lstm", "lstm.script.pt", "--batch 64"},
          {"resnet50", "resnet50.script.pt", "--input 'float32[32,3,64,64]'"}};
}

std::string ReuseProfile(const Suite& suite, const ZooCase& c) {
  return "--profile-in '" + suite.out + "/" + c.name + ".profile.yaml' " + c.input;
}

const nlohmann::json& ZooProfile(const Suite& suite, const ZooCase& c) {
  static std::map<std::string, nlohmann::json> made;  // bench_suite is one thread
  const std::string key = suite.out + "/" + c.name;
  auto it = made.find(key);
  if (it == made.end()) {
    it = made.emplace(key, MakePlan(suite, c.file, "--gpus 2 " + c.input + " --profile-out '" + key + ".profile.yaml'",
                                    c.name + ".auto"))
             .first;
  }
  return it->second;
}

}  // namespace mp::bench
